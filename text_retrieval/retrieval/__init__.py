"""Retrieval: one index module, exact and approximate search, top-k kernels, the corpus cache, the
prefixes and lengths an encoder uses at evaluation and serving time."""
