"""The search strategies: naive RAG, the DeepSearcher-style pipeline, hop-by-hop chain search
and the DeepSearch-style agent (with its memory and answer checks), plus report writing.
``registry.run_strategy`` runs any of them by name."""
