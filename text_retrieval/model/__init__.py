"""The encoder (poolings incl. SPLADE), the trained bi-encoder, sentence-transformers export, model files."""
