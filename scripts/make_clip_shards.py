"""Image folder + captions file (or the embedded digits set) -> training shards + CLIP-benchmark sets
(also ``clipmag-make-clip-shards``; ``--help`` for the options).

    python scripts/make_clip_shards.py --images photos/ --captions captions.tsv --output data/mine
    python scripts/make_clip_shards.py --embedded --output data/digits      # the composite digits
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from clipmag.clip.shards_cli import entry  # noqa: E402

if __name__ == "__main__":
    entry()
