"""Sweeps on a SLURM cluster: every cell one job (``launcher``) and what the cluster says about
those jobs (``jobs``)."""
