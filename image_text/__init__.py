"""The image-text front end: open_clip towers with a similarity head, trained by the shared engine.

A sample is an image with all of its captions (COCO has five). ``config.py`` (the run's settings and
their resolution), ``task.py`` (the engine task), ``cli.py`` (the command line) and ``cost.py`` (a
step's count for sweep plans) make the trainer; ``plugin.py`` registers it with the core. The rooms:
``model/`` (the model section, open_clip towers, the model with its head and loss, weights, export
and loading), ``data/`` (the data section, shard reading and training batches, the bundled digits,
the emoji set from pinned Debian packages, captions files, COCO and Flickr30k, the split by image,
writing shards and benchmark sets, and the shard builder's command line), ``evaluation/``
(head-aware retrieval in the COCO protocol, zero-shot, and CLIP-benchmark scored with the head).

The package imports none of them: its plugin registration and command lines stay free of torch and
open_clip until a model is built.
"""
