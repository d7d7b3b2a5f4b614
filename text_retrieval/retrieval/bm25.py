"""BM25 over a corpus, the lexical side of hybrid retrieval and the RAG evaluation's baseline row.

``bm25s`` with Lucene's BM25 variant, k1 = 1.5, b = 0.75, English stop words and no stemming, over
the same texts the dense retriever encodes (``title + " " + text``). A query with no term in the
corpus still gets ``depth`` hits, all scored 0 (bm25s returns them in corpus order); ``matched``
drops such hits, which a fusion must not count as lexical evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from text_retrieval.retrieval.index import Run

__all__ = ["BM25_SETTINGS", "bm25_search", "matched"]

BM25_SETTINGS = {"library": "bm25s", "k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en"}


def bm25_search(
    doc_ids: Sequence[str], doc_texts: Sequence[str], query_ids: Sequence[str], query_texts: Sequence[str], depth: int
) -> Run:
    """The top ``depth`` documents of every query by BM25 (settings above): query id -> {document id: score}."""
    import bm25s  # imported here: it is slow to import and only hybrid and BM25 rows need it

    retriever = bm25s.BM25(k1=BM25_SETTINGS["k1"], b=BM25_SETTINGS["b"], method=BM25_SETTINGS["method"])
    stopwords = BM25_SETTINGS["stopwords"]
    retriever.index(bm25s.tokenize(list(doc_texts), stopwords=stopwords, show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(list(query_texts), stopwords=stopwords, show_progress=False)
    positions, scores = retriever.retrieve(tokens, k=min(depth, len(doc_ids)), show_progress=False)
    return {
        qid: {doc_ids[int(i)]: float(s) for i, s in zip(positions[row], scores[row])}
        for row, qid in enumerate(query_ids)
    }


def matched(run: Run) -> Run:
    """``run`` without the hits BM25 scored 0: documents sharing no term with the query."""
    return {qid: {doc: score for doc, score in hits.items() if score > 0} for qid, hits in run.items()}
