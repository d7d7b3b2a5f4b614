"""Mine hard negatives under a model's own similarity head and write them as training shards.

    python scripts/mine_negatives.py --model all-MiniLM-L6-v2 --norm qnorm --data data/beir/scifact \
        --split train --output runs/data/scifact-mined-qnorm --rank-min 10 --relative-margin 0.05

The command line lives in ``text_retrieval/retrieval/mine_cli.py``; ``main`` is importable from here too.
"""

from text_retrieval.retrieval.mine_cli import entry, main

__all__ = ["main"]

if __name__ == "__main__":
    entry()
