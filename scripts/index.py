"""Build a served index of a corpus with a text export (faiss and LanceDB), and query it.

    python scripts/index.py build --model runs/text/qnorm/export --corpus data/beir/scifact --output runs/index/scifact
    python scripts/index.py query --index runs/index/scifact --text "vitamin d and infections"

The command line lives in ``text_retrieval/serving/cli.py`` (``clipmag-index`` once installed).
"""

from text_retrieval.serving.cli import entry, main

__all__ = ["main"]

if __name__ == "__main__":
    entry()
