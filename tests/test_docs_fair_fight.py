"""The fair fight's tables and words come from its stored cells: a small stored sweep of known scores
(dnorm far above cosine on every query, qnorm level with it) renders the table, the dev choices with
their grids, the dev and test curves, and verdicts that follow the table's Holm."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.manuals import fair_fight as ff
from clipmag_experiments.report.stored import StoredResults

QUERIES = 60
BASE = np.linspace(0.2, 0.8, QUERIES)
OFFSET = {"cosine": 0.0, "qnorm": 0.0, "dnorm": 0.1}  # dnorm better on every query; qnorm identical


def _cell(
    root: Path,
    group: str,
    head: str,
    seed: int,
    steps: int,
    timings: dict | None = None,
    scale: float | None = None,
    **cell: object,
) -> None:
    variant = cell.get("variant")
    folder = root / ff.SWEEP / group / "splade" / (f"{head}-{variant}" if variant else head) / f"seed{seed}"
    folder.mkdir(parents=True)
    record = {"group": group, "kind": "text", "model": "splade", "head": head, "seed": seed, **cell}
    (folder / "cell.json").write_text(json.dumps(record))
    scores = BASE + OFFSET[head] + 0.001 * seed
    per_query = {f"q{i}": {"NDCG@10": float(s)} for i, s in enumerate(scores)}
    curve = [{"step": s, "dev_NDCG@10": 0.3 + OFFSET[head] + s / 4000} for s in range(100, steps + 1, 100)]
    results = build_results(
        {"steps": steps, "seed": seed},
        HeadRecord({"name": head}, scale=scale),
        {"dev_curve": curve},
        {"pypi-test": {"NDCG@10": float(scores.mean()), "per_query": per_query}},
        {},
        timings or {"train_seconds": 30.0, "test_seconds": 6.0},
        config={"data": {"batch_size": 64}, "train": {}},
    )
    write_results(results, folder)


def _chosen(source: str, variant: str, grid: list[str]) -> dict:
    return {"from": source, "variant": variant, "grid": grid, "extended": []}


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> StoredResults:
    """Every head's rate grid (qnorm chose its lowest rate: an edge) and scale grid, then both budgets."""
    root = tmp_path_factory.mktemp("results")
    rates, scales = ["lr2e-5", "lr6e-5", "lr2e-4"], ["scale5", "scale10", "scale20", "scale50"]
    for head in ff.HEADS:
        for rate in rates:
            _cell(root, "lr-grid", head, 0, 40, variant=rate)
        chosen_rate = _chosen("lr-grid", "lr2e-5" if head == "qnorm" else "lr6e-5", rates)
        for scale in scales:
            _cell(root, "scale-grid", head, 0, 40, variant=scale, chosen=chosen_rate)
        for group, steps in (("code-search-2560", 40), ("code-search-25600", 400)):
            for seed in (0, 1, 2):
                _cell(root, group, head, seed, steps, variant=None, chosen=_chosen("scale-grid", "scale20", scales))
    return StoredResults(root)


def test_the_table_marks_dnorm_above_and_qnorm_level_under_the_whole_tables_holm(stored):
    table = ff.fight_table(stored)
    assert "`code-search-25600` | 25,600" in table and "`code-search-2560` | 2,560" in table
    assert "▲†" in table and table.count("▲") == 2  # dnorm at both budgets, qnorm level
    assert "_Not run yet: `code-search-25600-learned`, `scifact-2560`._" in table
    assert ff.verdict(stored, "code-search-25600/pypi-test/splade/dnorm") == "above†"
    assert ff.verdict(stored, "code-search-25600/pypi-test/splade/qnorm") == "not separated"
    assert ff.difference(stored, "code-search-2560/pypi-test/splade/dnorm").startswith("+10.00 [")
    assert ff.survivors(stored) == "2 of 4"
    assert ff.verdicts(stored, "code-search-25600/splade/dnorm") == "above† on PyPI test"
    tally = ff.tally(stored, "code-search-2560")  # qnorm's twin scores leave nothing to detect but an MDE
    assert tally.startswith("1 above†, 0 below† and 1 not separated (MDE ") and tally.endswith("), of 2")
    whole = ff.tally(stored)  # both budgets: dnorm above at each, qnorm level at each
    assert whole.startswith("2 above†, 0 below† and 2 not separated (MDE ") and whole.endswith("), of 4")


def test_the_choices_name_each_grid_as_its_stored_cells_read_it_and_an_edge(stored):
    table = ff.choices_table(stored)
    assert "| splade | qnorm | 2e-5 (2e-5, 6e-5, 2e-4) **edge** | 20 (5, 10, 20, 50) |" in table
    assert "| splade | cosine | 6e-5 (2e-5, 6e-5, 2e-4) | 20 (5, 10, 20, 50) |" in table
    assert ff.edges(stored) == "1 of 6"


def test_the_curves_show_dev_at_every_step_and_test_at_each_budget(stored):
    table = ff.curves_table(stored)
    assert "| dev, step 100 | dev, step 200 | dev, step 300 | dev, step 400 |" in table
    assert "| splade | dnorm | 42.50 | 45.00 | 47.50 | 50.00 |" in table
    assert "| splade | PyPI test packages (held out) | cosine | 50.10 | 50.10 |" in table


def test_a_value_for_a_row_the_table_lacks_is_refused(stored):
    with pytest.raises(ValueError, match="no dnorm of splade on scifact in group 'scifact-2560'"):
        ff.verdict(stored, "scifact-2560/scifact/splade/dnorm")
    with pytest.raises(ValueError, match="expected GROUP/DATASET/START/HEAD"):
        ff.verdict(stored, "code-search-2560/splade/dnorm")


def test_the_hours_sum_every_run_and_say_at_least_when_a_resume_hid_time(stored, tmp_path):
    assert ff.VALUES["ff-hours"](stored, "") == "0.4 hours"  # 39 runs of 36 s
    partial = {"train_seconds": 30.0, "test_seconds": 6.0, "train_seconds_partial": True}
    _cell(tmp_path, "code-search-2560", "cosine", 0, 40, timings=partial, variant=None)
    assert ff.VALUES["ff-hours"](StoredResults(tmp_path), "") == "at least 0.0 hours"


def test_the_learned_arm_shows_where_each_heads_scale_went(tmp_path):
    for seed, scale in ((0, 30.0), (1, 40.0)):
        _cell(tmp_path, ff.LEARNED, "dnorm", seed, 400, scale=scale, variant=None)
    assert ff.learned_scales(StoredResults(tmp_path).sweep(ff.SWEEP)) == {("splade", "dnorm"): 35.0}


def test_the_marked_comparisons_mean_and_rate_are_read_from_the_table(stored):
    assert ff.marked(stored, "above") == (
        "splade's dnorm on PyPI test in code-search-2560; splade's dnorm on PyPI test in code-search-25600"
    )
    assert ff.marked(stored, "above-row") == ff.marked(stored, "above")
    assert ff.marked(stored, "below") == "none"
    assert ff.mean(stored, "code-search-25600/pypi-test/splade/cosine") == "50.10"  # seeds 0-2 average
    assert ff.rate(stored, "splade/qnorm") == "2e-5" and ff.rate(stored, "splade/dnorm") == "6e-5"
    with pytest.raises(ValueError, match="expected above, below, above-row or below-row"):
        ff.marked(stored, "higher")
    with pytest.raises(ValueError, match="no dev choice for dnorm of minilm-dot"):
        ff.rate(stored, "minilm-dot/dnorm")


def test_the_stored_fight_puts_no_head_above_cosine_on_distinct_code_pairs():
    """The manuals say that with distinct code pairs no magnitude head ends above cosine, not even
    under Holm within the row; this fails if a stored ▲ in a code-search group says otherwise."""
    stored = StoredResults(Path(__file__).resolve().parents[1] / "results")
    code_search = tuple(f" in {group}" for group in ff.GROUPS if group.startswith("code-search"))
    above = ff.marked(stored, "above-row").split("; ")
    assert not [a for a in above if a.endswith(code_search)], above
