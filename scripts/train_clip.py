"""Train an open_clip model with a similarity head (also ``clipmag-train-clip``); no arguments
trains the bundled digits run.

    python scripts/train_clip.py                                   # bundled default, sym + cosine
    torchrun --nproc_per_node=2 scripts/train_clip.py --norm qnorm --objective i2t
    python scripts/train_clip.py --config configs/clip/i2t_qnorm.yaml --resume latest
    python scripts/train_clip.py --help                            # every key and the value it runs with
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from image_text.cli import entry  # noqa: E402

if __name__ == "__main__":
    entry()
