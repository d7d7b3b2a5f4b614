"""Text data, in rooms by job: ``loaders/`` reads the evaluation sets (BEIR, BRIGHT, STS),
``training/`` builds training pairs and text shards, ``bundled/`` builds the offline default sets;
``fetch`` downloads every public set (``download`` is its command line) and ``shards_cli`` turns
pairs into training shards."""
