"""The hybrid table of docs/deploy.md: every head alone and fused with BM25 (rrf, minmax, zscore).

SciFact and Cranfield (test queries; nDCG@10 through eval_text.py's ``--hybrid``) and the bundled
RAG passages with their answerable questions (accuracy@5 and @20 through eval_rag.py's rows,
``--hybrid``; no reader), all-MiniLM-L6-v2 and, with ``--export``, a fine-tuned dot-family export;
BM25 alone as its own row. Measure alone, on a quiet machine:

    python results/deploy/measure_hybrid.py --export runs/text/dot-for-ann/export
    python scripts/report.py docs          # renders its table into docs/deploy.md (deploy-hybrid)
    python results/deploy/measure_hybrid.py --docs 200 --queries 10 --output runs/deploy/check-hybrid.json   # a check
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from common import (
    SHARED,
    add_common_arguments,
    beir_sets,
    code_at_start,
    evaluate,
    label,
    load_encoder,
    models,
    write_rows,
)

from clipmag.scoring.head_config import HEAD_NAMES
from clipmag.scoring.heads import every_head
from text_retrieval.evaluation.metrics import evaluate_run
from text_retrieval.rag.config import RagConfig, RagDataConfig
from text_retrieval.rag.data import Corpus
from text_retrieval.rag.pipeline import load_rag_data, score_run
from text_retrieval.rag.retrieve import bm25_run, dense_runs, hybrid_run
from text_retrieval.retrieval.bm25 import bm25_search
from text_retrieval.retrieval.fusion import FUSIONS
from text_retrieval.retrieval.index import RetrievalSettings

RAG_AT = (5, 20)


def beir_rows(args: argparse.Namespace, encoder, model: str) -> list[dict]:
    rows = []
    for dataset in beir_sets(args.docs, args.queries):
        for name, head in every_head(encoder.head).items():
            for fusion in ("none", *FUSIONS):
                result = evaluate(encoder, head, dataset, RetrievalSettings(hybrid=fusion), args)
                rows.append({"dataset": dataset.name, "model": label(model), "head": name, "fusion": fusion})
                rows[-1]["ndcg10"] = result["NDCG@10"]
                print(f"{dataset.name:<10} {label(model):<24} {name:<10} {fusion:<7} {result['NDCG@10']:.4f}")
    return rows


def bm25_rows(args: argparse.Namespace) -> list[dict]:
    rows = []
    for dataset in beir_sets(args.docs, args.queries):
        texts = [dataset.queries[q] for q in dataset.query_ids]
        run = bm25_search(dataset.corpus_ids, dataset.corpus_texts, dataset.query_ids, texts, 100)
        rows.append({"dataset": dataset.name, "model": "bm25", "head": None, "fusion": "bm25"})
        rows[-1]["ndcg10"] = evaluate_run(dataset.qrels, run)[0]["NDCG@10"]
    return rows


def rag_rows(args: argparse.Namespace, encoder, model: str | None) -> list[dict]:
    """accuracy@k of each head's row and its fusions (``model`` None: the BM25 row alone)."""
    data = RagDataConfig(source="bundled", bundled_root=args.rag_root, dpr_qa_dir=str(SHARED / "qa" / "dpr"))
    corpus, (qa,) = load_rag_data(RagConfig(data=data))
    if args.docs:  # a check: the first passages only
        corpus = Corpus(corpus.name, corpus.passages[: args.docs], corpus.source)
    qa.questions = qa.questions[: args.queries] if args.queries else qa.questions
    lexical = bm25_run(corpus, qa.questions, 100)
    runs = [lexical]
    if model is not None:
        heads = list(HEAD_NAMES)
        dense = dense_runs(encoder, corpus, qa.questions, heads, 100, args.cache_dir, show_progress=False)
        runs = [r for run in dense for r in (run, *(hybrid_run(run, lexical, f, 100) for f in FUSIONS))]
    rows = []
    for run in runs:
        tokens_each_time = defaultdict(lambda: None)  # has_answer tokenises each passage itself
        metrics, _ = score_run(run, corpus, qa, tokens_each_time, 5, None, None, None)
        head, _, fusion = run.label.partition("+bm25-")
        row = {"dataset": "rag-bundled", "model": label(model) if model else "bm25", "head": model and head}
        row.update(fusion=fusion or ("bm25" if model is None else "none"))
        row.update({f"accuracy@{k}": metrics[f"accuracy@{k}"] for k in RAG_AT})
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, "results/deploy/hybrid.json")
    parser.add_argument("--rag-root", default="runs/data/rag-bundled", help="the bundled RAG set (built if absent)")
    args = parser.parse_args()
    code_at_start()  # read now: the results name the code this process started with
    rows, encoders = bm25_rows(args) + rag_rows(args, None, None), {}
    for model in models(args.export):
        encoder = encoders[label(model)] = load_encoder(model)
        rows += beir_rows(args, encoder, model) + rag_rows(args, encoder, model)
    config = {"export": args.export, "docs": args.docs, "queries": args.queries, "top_k": 100, "rag_at": RAG_AT}
    write_rows(args.output, "hybrid", config, rows, encoders)


if __name__ == "__main__":
    main()
