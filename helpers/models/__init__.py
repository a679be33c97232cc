"""The model layer: chat backends (embedded llama.cpp, Ollama, OpenAI-compatible), structured
output with repair and retries, grammar-checked sampling, the GGUF catalogue and the usage ledger."""
