"""Where a magnitude head helps comes from the stored cells of the powered fight and the ladder: two
small stored sweeps of known scores (qnorm far above cosine only from the start whose document norms
carry relevance, at the larger budget) give rungs ordered by test set, budget and the start's norm
signal, the sentence that names the rungs where a head is above cosine, and the README's row once
the ladder has a compared run."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.manuals import findings, ladder
from clipmag_experiments.manuals import powered_fight as pf
from clipmag_experiments.report.stored import StoredResults

HEADS = ("cosine", "qnorm", "dnorm")
QUERIES = 300
# (sweep, compared group, start, steps, Cohen's d of the start's document norms, qnorm's gain)
RUNGS = (
    (pf.SWEEP, pf.FIGHT, "minilm", 400, 0.05, 0.0),
    (pf.SWEEP, pf.FIGHT, "splade", 400, 0.40, 0.0),
    (ladder.SWEEP, pf.FIGHT, "random", 400, -0.10, 0.0),
    (ladder.SWEEP, ladder.BUDGET_GROUP, "contriever-style", 1600, 0.60, 0.08),
)


def _scores(*key: object, shift: float) -> np.ndarray:
    seed = int(hashlib.sha256(json.dumps(key).encode()).hexdigest()[:8], 16)
    noise = np.random.default_rng(seed).normal(0.0, 0.02, QUERIES)
    return np.clip(np.linspace(0.3, 0.7, QUERIES) + shift + noise, 0, 1)


def _cell(root: Path, sweep: str, group: str, start: str, head: str, seed: int, steps: int, metric: dict) -> None:
    folder = root / sweep / group / start / head / f"seed{seed}"
    folder.mkdir(parents=True)
    record = {"group": group, "kind": "text", "model": start, "head": head, "seed": seed, "argv": []}
    (folder / "cell.json").write_text(json.dumps(record))
    config = {"data": {"batch_size": 64}, "train": {"steps": steps}}
    results = build_results(
        {"steps": steps, "seed": seed}, HeadRecord({"name": head}), {"step": steps}, metric, {}, {}, config=config
    )
    write_results(results, folder)


def _metric(scores: np.ndarray, cohens_d: float | None = None) -> dict:
    per_query = {f"q{i}": {"NDCG@10": float(s)} for i, s in enumerate(scores)}
    entry = {"NDCG@10": float(scores.mean()), "per_query": per_query}
    if cohens_d is not None:
        entry["diagnostics"] = {"document_norm_effect": {"cohens_d": cohens_d}}
    return {"pypi-test": entry}


def _protocol(root: Path, sweep: str, compared: list[str]) -> None:
    groups = [{"name": name, "heads": list(HEADS)} for name in ("start", "tune", *compared)]
    comparison = {"groups": {g: "chosen on tune" for g in compared}, "holm": "table", "margin": 0.01}
    (root / sweep).mkdir(parents=True, exist_ok=True)
    (root / sweep / "sweep.json").write_text(
        json.dumps({"starts": [{"config": {"groups": groups}, "comparison": comparison}]})
    )


def _store(root: Path, sweeps: tuple[str, ...]) -> StoredResults:
    _protocol(root, pf.SWEEP, [pf.FIGHT])
    _protocol(root, ladder.SWEEP, [pf.FIGHT, ladder.BUDGET_GROUP])
    for sweep, group, start, steps, cohens_d, gain in RUNGS:
        for head in HEADS:
            _cell(root, sweep, "start", start, head, 0, 0, _metric(_scores(start, head, shift=-0.05), cohens_d))
            if sweep not in sweeps:
                continue
            for seed in (0, 1, 2):
                shift = gain if head == "qnorm" else 0.0
                _cell(root, sweep, group, start, head, seed, steps, _metric(_scores(start, head, seed, shift=shift)))
    return StoredResults(root)


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> StoredResults:
    return _store(tmp_path_factory.mktemp("results"), (pf.SWEEP, ladder.SWEEP))


def test_rungs_go_by_budget_then_the_starts_norm_signal(stored):
    found = ladder.rungs(stored)
    assert [(r.row.start, r.pairs) for r in found] == [
        ("random", 25_600),
        ("minilm", 25_600),
        ("splade", 25_600),
        ("contriever-style", 102_400),
    ]
    assert found[0].label == "random (d -0.10) · pypi-test · 25,600 pairs"
    table = ladder.where_table(stored)
    row = next(line for line in table.splitlines() if "contriever-style" in line)
    assert row.startswith("| PyPI test packages | 102,400 | contriever-style | +0.60 | ") and "**above†**" in row
    assert "powered fight's rungs alone" not in table


def test_the_answer_names_the_rungs_where_a_head_is_above_cosine(stored):
    assert ladder.answer(stored) == (
        "a magnitude head is above cosine on 1 of the 4 rungs: qnorm from contriever-style on PyPI test packages "
        "at 102,400 pairs"
    )


def test_the_readme_row_waits_for_the_ladders_compared_run(tmp_path, stored):
    question = next(q for q in findings.QUESTIONS if q.pending is findings.LADDER)
    assert findings.LADDER.answered(stored)
    labelled = findings.compared(question, stored)
    assert len(labelled) == 8 and labelled[-1].label.startswith("contriever-style (d +0.60)")
    early = _store(tmp_path / "early", (pf.SWEEP,))  # the powered fight compared, the ladder at step 0 only
    assert not findings.LADDER.answered(early)
    assert ladder.where_table(early).endswith(
        "_The ladder has no compared run stored yet: these are the powered fight's rungs alone._"
    )
    assert "no magnitude head is above cosine on any of the 2 rungs" in ladder.answer(early)
    assert ladder.where_table(_store(tmp_path / "none", ())).startswith("_Not run yet")
    shutil.rmtree(tmp_path / "early" / ladder.SWEEP)  # the ladder not begun: no folder of its own
    assert "no magnitude head is above cosine on any of the 2 rungs" in ladder.answer(StoredResults(tmp_path / "early"))
