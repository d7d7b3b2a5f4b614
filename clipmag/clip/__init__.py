"""The image-text front end: open_clip towers with a similarity head, trained by the shared engine.

Modules: ``model`` (open_clip + head, open_clip-compatible checkpoints and export), ``data``
(WebDataset shards), ``embedded`` (the offline composite-digits set), ``config`` (the run's
settings and their resolution), ``task`` (the engine task), ``cli`` (the command line),
``evaluate`` (head-aware retrieval and zero-shot), ``benchmark`` (CLIP-benchmark on our
checkpoints), ``shards`` / ``shards_cli`` (writing shards and benchmark sets).
"""

from .model import ClipMagModel, ClipModelConfig, export_open_clip, load_clipmag

__all__ = ["ClipMagModel", "ClipModelConfig", "export_open_clip", "load_clipmag"]
