"""The image-text front end: open_clip towers with a similarity head, trained by the shared engine.

Modules: ``model`` (open_clip + head, open_clip-compatible checkpoints and export), ``data``
(WebDataset shards, in-memory batches), ``embedded`` (the offline composite-digits set), ``task``
(config and the engine task), ``evaluate`` (head-aware retrieval and zero-shot), ``benchmark``
(CLIP-benchmark on our checkpoints).
"""

from .model import ClipMagModel, ClipModelConfig, export_open_clip, load_clipmag

__all__ = ["ClipMagModel", "ClipModelConfig", "export_open_clip", "load_clipmag"]
