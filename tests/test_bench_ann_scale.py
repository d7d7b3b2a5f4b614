"""benchmarks/bench_ann_scale.py on a small corpus: it builds the code corpus from the installed
packages, encodes it with the packaged MiniLM, measures every head and layout, and writes a record
that docs/deploy.md's block renders (its numbers on 300 documents mean nothing; the checks are of
what they must satisfy)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from text_fixtures import REPO

from clipmag_experiments.manuals.deploy import ann_scale_table


@pytest.mark.slow
def test_small_run_writes_a_record_the_deploy_page_renders(tmp_path):
    output = tmp_path / "ann_scale.json"
    argv = ["--docs", "300", "--queries", "20", "--cache-dir", str(tmp_path / "cache"), "--output", str(output)]
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_ann_scale.py"), *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    assert record["benchmark"] == "ann_scale" and record["code"]["commit"] and record["cpu"]
    assert record["corpus"]["documents"] == 300 and record["corpus"]["queries"] == 20
    layouts = {(r["head"], r["layout"]) for r in record["rows"]}
    dot_family = {(head, layout) for head in ("dot", "qnorm", "learnable") for layout in ("ip", "mips-l2")}
    assert layouts == {("cosine", "ip")} | dot_family
    assert len(record["rows"]) == len(layouts) * 10 and all(0.0 <= r["recall"] <= 1.0 for r in record["rows"])
    by = {(r["head"], r["layout"], r["method"], r["value"]): r["recall"] for r in record["rows"]}
    for method, value in (("hnsw", 16), ("ivf", 1)):  # a query's scale does not change an inner-product search
        assert by[("qnorm", "ip", method, value)] == by[("dot", "ip", method, value)]
    assert by[("dot", "ip", "ivf", 256)] == 1.0  # every list probed (300 documents: 7 lists): exact
    assert "| learnable | mips-l2 |" in ann_scale_table(record)
