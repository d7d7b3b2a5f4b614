"""Train an open_clip model with a similarity head; no arguments trains the embedded digits run.

    python scripts/train_clip.py                                   # embedded default, sym + cosine
    torchrun --nproc_per_node=2 scripts/train_clip.py --norm qnorm --loss i2t
    python scripts/train_clip.py --config configs/clip/i2t_qnorm.yaml --resume latest
    python scripts/train_clip.py --help                            # every key and its default
"""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from clipmag.clip.task import parse_args, run  # noqa: E402
from clipmag.config import ConfigError  # noqa: E402
from clipmag.clip.data import ShardError  # noqa: E402

if __name__ == "__main__":
    try:
        run(parse_args(sys.argv[1:]))
    except (ConfigError, ShardError) as err:
        sys.exit(f"error: {err}")
