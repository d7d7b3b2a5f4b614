"""The powered fight's tables and words come from its stored cells: a small stored sweep of known
scores (dot far below cosine, qnorm the same as cosine up to noise, dnorm far above it; on a small
noisy test set nothing apart) renders the step-0 and trained rows with the four verdicts, each head's
move from its start, and each rate choice's margin with its paired standard error over dev queries."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.design.grid import EVALUATIONS_DIR
from clipmag_experiments.manuals import findings
from clipmag_experiments.manuals import powered_fight as pf
from clipmag_experiments.report.stored import StoredResults

RATES = ("lr2e-5", "lr6e-5", "lr2e-4")
# trained nDCG@10 above the shared base, per head, on the large test set (the small one: all 0)
TRAINED = {"cosine": 0.0, "dot": -0.08, "qnorm": 0.0, "dnorm": 0.08}
# the start scored with each head: qnorm ranks as dot and dnorm as cosine at step 0
UNTRAINED = {"cosine": -0.05, "dot": -0.08, "qnorm": -0.08, "dnorm": -0.05}
# dev nDCG@10 per rate: 6e-5 best for every head but dnorm, whose best is the grid's high edge
DEV = {"lr2e-5": -0.01, "lr6e-5": 0.0, "lr2e-4": -0.03}
DEV_DNORM = {"lr2e-5": -0.03, "lr6e-5": -0.01, "lr2e-4": 0.0}
TEST_SETS = {"pypi-test": (300, 0.02, 1.0), "cranfield": (30, 0.1, 0.0)}  # queries, noise, effect scale
NUMERICS = {"cpu": "AMD EPYC", "cpu_bf16": ["avx512_bf16"], "autocast": "bfloat16"}


def _noise(*key: object, size: int, sd: float) -> np.ndarray:
    seed = int(hashlib.sha256(json.dumps(key).encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).normal(0.0, sd, size)


def _test_metrics(head: str, seed: int, offsets: dict[str, float]) -> dict:
    metrics = {}
    for dataset, (queries, sd, scale) in TEST_SETS.items():
        base = np.linspace(0.3, 0.7, queries)
        scores = np.clip(
            base + scale * offsets[head] + _noise(dataset, head, seed, str(offsets), size=queries, sd=sd), 0, 1
        )
        per_query = {f"q{i}": {"NDCG@10": float(s)} for i, s in enumerate(scores)}
        metrics[dataset] = {"NDCG@10": float(scores.mean()), "per_query": per_query}
    return metrics


def _cell(root: Path, group: str, head: str, seed: int, steps: int, metrics: dict, **cell: object) -> Path:
    variant = cell.get("variant")
    folder = root / pf.SWEEP / group / "splade" / (f"{head}-{variant}" if variant else head) / f"seed{seed}"
    folder.mkdir(parents=True)
    argv = ["data.batch_size=64", f"train.steps={steps}"]
    record = {"group": group, "kind": "text", "model": "splade", "head": head, "seed": seed, "argv": argv, **cell}
    (folder / "cell.json").write_text(json.dumps(record))
    results = build_results(
        {"steps": steps, "seed": seed},
        HeadRecord({"name": head}),
        {"step": 0 if steps == 0 else 300 + 100 * (seed == 2)},
        metrics,
        {},
        {"train_seconds": 60.0, "test_seconds": 12.0},
        numerics=NUMERICS,
    )
    write_results(results, folder)
    return folder


def _dev_scores(head: str, rate: str, seed: int) -> np.ndarray:
    offsets = DEV_DNORM if head == "dnorm" else DEV
    return 0.6 + offsets[rate] + _noise("dev", head, rate, seed, size=200, sd=0.02)


def _write_dev(folder: Path, scores: np.ndarray) -> None:
    out = folder / EVALUATIONS_DIR / pf.DEV_EVALUATION
    out.mkdir(parents=True)
    per_query = {f"d{i}": {"NDCG@10": float(s)} for i, s in enumerate(scores)}
    summary = {
        "split": "dev",
        "metrics": {"pypi-dev": {"NDCG@10": float(scores.mean())}},
        "per_query": {"pypi-dev": per_query},
    }
    (out / "results.json").write_text(json.dumps(summary))


def _protocol(root: Path) -> None:
    groups = [
        {"name": pf.START, "models": ["splade=splade-tiny"], "heads": list(pf.HEADS), "seeds": [0]},
        {
            "name": pf.TUNE,
            "models": ["splade=splade-tiny"],
            "heads": list(pf.HEADS),
            "seeds": [0, 1],
            "variants": [{"name": r} for r in RATES],
        },
        {"name": pf.FIGHT, "models": ["splade=splade-tiny"], "heads": list(pf.HEADS), "seeds": [0, 1, 2]},
    ]
    comparison = {"groups": {pf.FIGHT: "chosen on tune"}, "holm": "table", "margin": 0.01, "start_group": pf.START}
    folder = root / pf.SWEEP
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.json").write_text(
        json.dumps({"starts": [{"config": {"groups": groups}, "comparison": comparison}]})
    )


def _starts(root: Path) -> None:
    _protocol(root)
    for head in pf.HEADS:
        _cell(root, pf.START, head, 0, 0, _test_metrics(head, 0, UNTRAINED))


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> StoredResults:
    """The whole protocol for one start: step-0 cells, the rate grid with two seeds and its dev
    evaluation, the compared runs at the chosen rate (seeds 0 and 1 the tuning runs themselves)."""
    root = tmp_path_factory.mktemp("results")
    _starts(root)
    for head in pf.HEADS:
        means = {}
        tuned = {}
        for rate in RATES:
            for seed in (0, 1):
                folder = _cell(root, pf.TUNE, head, seed, 400, _test_metrics(head, seed, TRAINED), variant=rate)
                scores = _dev_scores(head, rate, seed)
                _write_dev(folder, scores)
                tuned[(rate, seed)] = folder
            means[rate] = float(np.mean([_dev_scores(head, rate, s).mean() for s in (0, 1)]))
        best = max(means, key=means.get)
        chosen = {
            "from": pf.TUNE,
            "variant": best,
            "scores": means,
            "grid": list(RATES),
            "at_grid_edge": best == RATES[-1],
        }
        for seed in (0, 1, 2):
            shared = {"same_run_as": str(tuned[(best, seed)])} if seed < 2 else {}
            _cell(root, pf.FIGHT, head, seed, 400, _test_metrics(head, seed, TRAINED), chosen=chosen, **shared)
    return StoredResults(root)


def _said(verdict: str) -> tuple[str, float]:
    """``below† (-8.02 [...], MDE ...)`` -> (``below†``, -8.02)."""
    word, difference = re.match(r"(\S+) \(([+-][\d.]+) \[", verdict).groups()
    return word, float(difference)


def _moved(cell: str) -> tuple[str, float]:
    """``**rose†** +5.02 [...], MDE ...; pairs seen ...`` -> (``rose†``, 5.02)."""
    word, difference = re.match(r"\*\*(\S+)\*\* ([+-][\d.]+) \[", cell).groups()
    return word, float(difference)


def test_the_table_shows_the_start_and_reads_each_head_under_the_whole_tables_holm(stored):
    table = pf.fight_table(stored)
    assert "| PyPI test packages (300 queries) | splade | step 0 |" in table
    assert "| Cranfield (30 queries) | splade | step 0 |" in table
    assert _said(pf.verdict(stored, "pypi-test/splade/dot")) == ("below†", pytest.approx(-8.0, abs=0.5))
    assert _said(pf.verdict(stored, "pypi-test/splade/qnorm")) == ("equivalent≈", pytest.approx(0.0, abs=0.5))
    assert _said(pf.verdict(stored, "pypi-test/splade/dnorm")) == ("above†", pytest.approx(8.0, abs=0.5))
    # thirty noisy queries: neither a difference nor an equivalence within one point can be shown
    assert all(pf.verdict(stored, f"cranfield/splade/{h}").startswith("undecided (") for h in ("dot", "qnorm", "dnorm"))
    tally = pf.tally(stored)
    assert tally.startswith("1 above†, 1 below†, 1 equivalent≈ and 3 undecided (MDE ") and tally.endswith(", of 6")
    assert pf.tally(stored, "in-domain").endswith("and 0 undecided, of 3")
    assert pf.tally(stored, "out-of-domain").startswith("0 above†, 0 below†, 0 equivalent≈ and 3 undecided")
    low, high = (float(x) for x in pf.detectable(stored, "in-domain").split("-"))
    assert 0 < low <= high < float(pf.detectable(stored, "out-of-domain").split("-")[0])
    assert "_Stored so far" not in table  # every planned cell is stored


def test_each_head_moves_from_its_own_start_with_the_pairs_its_checkpoints_saw(stored):
    table = pf.from_start_table(stored)
    row = next(line for line in table.splitlines() if line.startswith("| PyPI test packages | splade |"))
    cosine, dot, qnorm, dnorm = row.split(" | ")[2:6]
    assert _moved(cosine) == ("rose†", pytest.approx(5.0, abs=0.5))
    assert _moved(dot) == ("held≈", pytest.approx(0.0, abs=0.5))
    assert _moved(qnorm) == ("rose†", pytest.approx(8.0, abs=0.5))
    assert _moved(dnorm) == ("rose†", pytest.approx(13.0, abs=0.5))
    assert cosine.endswith("pairs seen 19,200 / 19,200 / 25,600")  # seeds 0 and 1 at step 300, seed 2 at 400
    assert pf.moves(stored, "in-domain").startswith("3 rose†, 0 fell†, 1 held≈ and 0 undecided")


def test_each_choice_reads_its_margin_over_the_runner_up_with_the_paired_se(stored):
    table = pf.choices_table(stored)
    cosine = re.search(
        r"\| splade \| cosine \| 6e-5 \(2e-5, 6e-5, 2e-4\) \| ([\d.]+) \| 2e-5: ([\d.]+) \| "
        r"\+([\d.]+) ± ([\d.]+) \(200\) \|",
        table,
    )
    assert cosine, table
    chosen, runner, margin, se = (float(x) for x in cosine.groups())
    assert abs(margin - 1.0) < 0.5 and abs(margin - (chosen - runner)) < 0.015  # the same queries, re-read
    assert 0.05 < se < 0.5  # per query, sd 0.02 over two seeds: 0.02 / sqrt(200) ~ 0.14 points
    assert "| splade | dnorm | 2e-4 (2e-5, 6e-5, 2e-4) **edge** |" in table


def test_the_words_name_the_machine_the_runs_and_a_complete_store(stored):
    # shared runs once, by start, with the precision its table has
    assert pf.machine(stored) == "splade: AMD EPYC, AVX-512 BF16 without AMX, bf16 autocast (32 runs)"
    assert pf.VALUES["pf-runs"](stored, "").startswith("32 runs at ")
    assert pf.stored_so_far(stored) == "every planned cell"
    assert findings.POWERED.answered(stored)
    assert len(findings._powered_fight(stored)) == 6


def test_before_the_compared_runs_the_blocks_say_what_is_stored(tmp_path):
    _starts(tmp_path)
    stored = StoredResults(tmp_path)
    assert pf.progress(stored) == "4 of 4 step-0 cells, 0 of 24 tuning runs and 0 of 12 compared runs"
    table = pf.fight_table(stored)
    assert table.startswith("_Not run yet: no compared run is stored._")
    assert "_Stored so far: 4 of 4 step-0 cells, 0 of 24 tuning runs and 0 of 12 compared runs" in table
    assert pf.tally(stored) == "not run yet" and pf.choices_table(stored).startswith("_Not chosen yet")
    assert not findings.POWERED.answered(stored)
    assert pf.status(stored) == (
        "running over sittings, nothing compared yet: 4 of 4 step-0 cells, 0 of 24 tuning runs and 0 of 12 "
        "compared runs stored"
    )
    assert pf.status(StoredResults(tmp_path / "elsewhere")) is None  # no cell: the row says not run yet


def test_a_value_for_a_row_the_table_lacks_is_refused(stored):
    with pytest.raises(ValueError, match="no compared dnorm of minilm on pypi-test"):
        pf.verdict(stored, "pypi-test/minilm/dnorm")
    with pytest.raises(ValueError, match="expected DATASET/START/HEAD"):
        pf.verdict(stored, "pypi-test/dnorm")
    with pytest.raises(ValueError, match="has no test against cosine"):
        pf.verdict(stored, "pypi-test/splade/cosine")
    with pytest.raises(ValueError, match="expected nothing, in-domain, out-of-domain"):
        pf.tally(stored, "somewhere")


def test_a_rerun_of_the_report_from_the_stored_scores_gives_the_same_marks(stored):
    """Every p is drawn from seeded streams and resolved at the table's level, so reading the stored
    per-query scores again gives the same verdicts, daggers and intervals."""
    again = StoredResults(stored.root)
    assert pf.fight_table(again) == pf.fight_table(stored)
    assert pf.from_start_table(again) == pf.from_start_table(stored)
