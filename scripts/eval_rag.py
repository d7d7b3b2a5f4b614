"""RAG evaluation: retrieve with the model's head (and BM25), read with an LM, score like the paper.

    python scripts/eval_rag.py --model all-MiniLM-L6-v2 --data bundled
    python scripts/eval_rag.py --corpus psgs_w100.tsv --qa nq.test.txt --model runs/text/default/export

The command line lives in ``text_retrieval/rag/cli.py``; ``main`` is importable from here too.
"""

from text_retrieval.rag.cli import entry, main

__all__ = ["main"]

if __name__ == "__main__":
    entry()
