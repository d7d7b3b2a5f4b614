"""The compression table of docs/deploy.md: nDCG@10 and memory per vector under every head at each
compression level, the plain and the norm-keeping variant side by side.

SciFact and Cranfield (test queries), all-MiniLM-L6-v2 and, with ``--export``, a fine-tuned
dot-family export; levels: full fp32, ``truncate:256``, ``truncate:128``, ``int8`` (ours, to the
nearest step), ``int8-floor`` (sentence-transformers' codes) and ``binary``
(``text_retrieval/retrieval/compression.py``), each scored by eval_text.py's exact search over the
reconstructed documents (``--compress``). Measure alone, on a quiet machine:

    python results/deploy/measure_compression.py --export runs/text/dot-for-ann/export
    python scripts/report.py docs          # renders its table into docs/deploy.md (deploy-compression)
    python results/deploy/measure_compression.py --docs 200 --queries 10 --output runs/deploy/check.json   # a check
"""

from __future__ import annotations

import argparse

from common import add_common_arguments, beir_sets, code_at_start, evaluate, label, load_encoder, models, write_rows

from clipmag.scoring.heads import every_head
from text_retrieval.retrieval.index import RetrievalSettings

LEVELS = ("truncate:256", "truncate:128", "int8", "int8-floor", "binary")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, "results/deploy/compression.json")
    parser.add_argument("--levels", nargs="+", default=list(LEVELS), help="compression levels (each also +norm)")
    args = parser.parse_args()
    code_at_start()  # read now: the results name the code this process started with
    specs = ["none", *(f"{level}{variant}" for level in args.levels for variant in ("", "+norm"))]
    datasets, rows, encoders = beir_sets(args.docs, args.queries), [], {}
    for model in models(args.export):
        encoder = encoders[label(model)] = load_encoder(model)
        for name, head in every_head(encoder.head).items():
            for dataset in datasets:
                for spec in specs:
                    result = evaluate(encoder, head, dataset, RetrievalSettings(compression=spec), args)
                    row = {"dataset": dataset.name, "model": label(model), "head": name, "compression": spec}
                    row.update(ndcg10=result["NDCG@10"], bytes_per_vector=result["search"].get("bytes_per_vector"))
                    row.update(documents=result["num_documents"], queries=result["num_queries"])
                    row["bytes_per_vector"] = row["bytes_per_vector"] or 4.0 * encoder.dim
                    rows.append(row)
                    print(f"{row['dataset']:<10} {row['model']:<24} {name:<10} {spec:<18} {row['ndcg10']:.4f}")
    config = {"levels": args.levels, "export": args.export, "docs": args.docs, "queries": args.queries, "top_k": 100}
    write_rows(args.output, "compression", config, rows, encoders)


if __name__ == "__main__":
    main()
