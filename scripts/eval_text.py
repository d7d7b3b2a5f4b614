"""Evaluate text encoders on BEIR, BRIGHT and STS data with each model's own similarity head.

    python scripts/eval_text.py --model sentence-transformers/all-MiniLM-L6-v2 \
        --data data/beir/scifact data/sts/stsbenchmark --norm cosine --output runs/eval

The command line lives in ``text_retrieval/evaluation/cli.py``; ``main`` is importable from here too.
"""

from text_retrieval.evaluation.cli import entry, main

__all__ = ["main"]

if __name__ == "__main__":
    entry()
