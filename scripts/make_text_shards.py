"""Build WebDataset training shards for the text trainer.

    python scripts/make_text_shards.py OUT_DIR --beir DATA/beir/scifact [--split train]
    python scripts/make_text_shards.py OUT_DIR --jsonl pairs.jsonl
    python scripts/make_text_shards.py OUT_DIR --bundled [runs/bundled-data]

The command line lives in ``text_retrieval/data/shards_cli.py``; ``main`` is importable from here too.
"""

from text_retrieval.data.shards_cli import entry, main

__all__ = ["main"]

if __name__ == "__main__":
    entry()
