"""The image-text front end: open_clip towers with a similarity head, trained by the shared engine.

A sample is an image with all of its captions (COCO has five). Modules: ``model_config`` (the
model section: which open_clip towers, from which weights), ``architecture`` (those towers
built), ``towers`` (a tower from another model, locked towers), ``model`` (open_clip + head +
loss, open_clip-compatible checkpoints and export), ``data_config`` (the data settings, the
split check), ``data`` (shard checks, sample decoding, evaluation sets), ``stream`` (training
batches of shards, resumable by counts), ``bundled`` (the offline composite-digits set),
``emoji`` / ``debian`` (the emoji set, drawn from pinned Debian packages),
``config`` (the run's settings and their resolution), ``task`` (the engine task), ``cli`` (the
command line), ``evaluate`` (head-aware retrieval in the COCO protocol, and zero-shot),
``benchmark`` / ``benchmark_scoring`` (CLIP-benchmark on our checkpoints, scored with the
model's head), ``sources`` / ``download`` / ``shards`` / ``shards_cli`` (captions files, COCO and
Flickr30k, the split by image, writing shards and benchmark sets).

The package imports none of them: its plugin registration and command lines stay free of torch and
open_clip until a model is built.
"""
