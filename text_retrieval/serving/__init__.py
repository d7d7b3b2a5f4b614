"""Serving a text export: an index of its corpus in faiss, LanceDB and Qdrant that ranks as the export's head does."""
