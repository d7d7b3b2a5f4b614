"""Checkpoints: writing them, reading them back, and deciding whether a run may continue from one.

The room's modules, by job: ``files`` writes and reads one checkpoint (atomically, weights only);
``schema`` says what a checkpoint of each format version holds; ``resume_check``,
``data_fingerprint`` and ``predating`` decide whether a checkpoint may be continued (same model and
head, same data, settings recorded before they existed). What a training run saves and restores is
the loop's (``clipmag.train.run_checkpoints``, which uses all of these); FSDP's sharded checkpoints
live beside FSDP (``clipmag.train.sharding``, ``clipmag.train.sharded_reading``).

The folder layout every one of them shares is named here, torch-free, so that a front end or a
command line can find a run's checkpoints without loading torch.
"""

__all__ = ["CHECKPOINT_DIR", "LATEST", "BEST"]

CHECKPOINT_DIR = "checkpoints"  # a run's checkpoints, under its train.output_dir
LATEST = "latest.pt"
BEST = "best.pt"
