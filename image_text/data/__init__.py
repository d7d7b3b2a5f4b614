"""Image-text data: the ``data`` section (``config``), reading shards and evaluation sets (``reading``)
and training batches from them (``stream``); the sets themselves (``bundled`` composite digits,
``emoji`` from pinned ``debian`` packages, ``sources`` / ``download`` for captions files, COCO and
Flickr30k), what a held-out split leaves out (``near_duplicates``), zero-shot ``prompts``, a set's
``baselines``, and writing it all as shards (``shards``; ``shards_cli`` is the command line)."""
