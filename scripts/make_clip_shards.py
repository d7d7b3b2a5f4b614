"""Images with their captions (a captions file, a COCO / Flickr30k Karpathy split, or the bundled
digits set) -> train / val / test shards split by image + CLIP-benchmark sets (also
``clipmag-make-clip-shards``; ``--help`` for the options).

    python scripts/make_clip_shards.py --output data/mine --images photos/ --captions captions.tsv
    python scripts/make_clip_shards.py --output data/coco --images data/raw/coco --download coco
    python scripts/make_clip_shards.py --output data/digits --bundled       # the composite digits
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from image_text.data.shards_cli import entry  # noqa: E402

if __name__ == "__main__":
    entry()
