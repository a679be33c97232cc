"""The knowledge layer: loaders, chunking, local embeddings, described Milvus collections,
ingest, and the retrieval utilities every strategy shares."""
