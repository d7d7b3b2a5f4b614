"""Retrieval: one index module, exact and approximate search, top-k kernels, the corpus cache."""
