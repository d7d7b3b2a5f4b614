"""Hard vs more: per test set of the hard-negatives sweep, each variant's nDCG@10 (mean over seeds)
and, per head, {mined, random} against in-batch only (one Holm family) and mined against random,
with the report's query-level test (clipmag.results.significance); qnorm-mined against cosine-mined too.

    python results/hard_negatives/hard_vs_more.py results/hard_negatives > results/hard_negatives/hard_vs_more.txt
"""

import json
import sys
from pathlib import Path

import numpy as np

from clipmag.results.significance import Comparison, compare_with_baseline, mark

VARIANTS = [f"{h}{k}" for h in ("cosine", "qnorm") for k in ("", "-mined", "-random")]


def _line(name: str, baseline: str, c: Comparison, holm: bool) -> str:
    p = f"p_holm {c.p_holm:.4f}" if holm else f"p {c.p:.4f}"
    interval = f"[{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}]"
    return f"  {name} vs {baseline}: d {100 * c.difference:+.2f} {interval} {p} t {c.p_seeds} {mark(c)}"


def _compare(systems: dict, names: tuple[str, ...], baseline: str, holm: bool) -> None:
    family = {k: systems[k] for k in names if k in systems}
    for name, c in compare_with_baseline(family, baseline).items():
        print(_line(name, baseline, c, holm))


root = Path(sys.argv[1])
data: dict = {}
for v in VARIANTS:
    for seed in (0, 1, 2):
        f = root / "scifact" / "default" / v / f"seed{seed}" / "results.json"
        if f.is_file():
            for ds, m in json.loads(f.read_text())["metrics"].items():
                scores = {q: float(x["NDCG@10"]) for q, x in m["per_query"].items()}
                data.setdefault(ds, {}).setdefault(v, {})[seed] = scores
for ds, systems in data.items():
    print(f"## {ds}")
    for v in (v for v in VARIANTS if v in systems):
        means = [np.mean(list(s.values())) for s in systems[v].values()]
        spread = 100 * np.std(means, ddof=1) if len(means) > 1 else 0
        print(f"{v}: {100 * np.mean(means):.2f} ± {spread:.2f} (n seeds {len(means)})")
    for h in ("cosine", "qnorm"):
        _compare(systems, (h, f"{h}-mined", f"{h}-random"), h, holm=True)
        _compare(systems, (f"{h}-mined", f"{h}-random"), f"{h}-random", holm=False)
    _compare(systems, ("cosine-mined", "qnorm-mined"), "cosine-mined", holm=False)
