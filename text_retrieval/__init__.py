"""The text front end: a dense / sparse retrieval trainer on clipmag's core, and its evaluations.

``task.py`` (data, model, validation, export), ``config.py`` and ``cli.py`` make the trainer;
``plugin.py`` registers it and its sweep evaluations with the core. The rooms: ``model/`` (encoder
and poolings, bi-encoder, sentence-transformers export), ``data/`` (BEIR, BRIGHT, STS, shards,
bundled and package-pair sets), ``retrieval/`` (index, exact and approximate search, corpus cache),
``evaluation/`` (pipelines, metrics, records, CLI), ``predict/`` (qnorm/dnorm predictors), ``rag/``.
"""
