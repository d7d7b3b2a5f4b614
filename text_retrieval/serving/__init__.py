"""Serving a text export: an index of its corpus in faiss and LanceDB that ranks as the export's head does."""
