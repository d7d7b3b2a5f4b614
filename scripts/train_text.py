"""Train a dense retriever with a similarity head (also ``clipmag-train-text``); ``--help`` lists every key.

torchrun --nproc_per_node=N scripts/train_text.py --norm qnorm --batch-size 8
python scripts/train_text.py            # the bundled default: MiniLM on stdlib code search
"""

from text_retrieval.cli import entry

if __name__ == "__main__":
    entry()
