"""Train a dense retriever with a similarity head; ``python scripts/train_text.py --help``.

    torchrun --nproc_per_node=N scripts/train_text.py --config configs/text/default.yaml --norm qnorm
    python scripts/train_text.py            # the embedded default: MiniLM on stdlib code search
"""

from clipmag.entry import run_entry_point
from text_retrieval.cli import main

if __name__ == "__main__":
    run_entry_point(main)
