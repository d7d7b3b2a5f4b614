"""What a sweep is, read from its YAML before anything runs: the grid of cells (``grid``), its
``plan``, ``slurm`` and ``prepare`` sections, how its systems are compared on test (``comparison``)
and the protocol written to ``sweep.json`` before the first result (``protocol``)."""
