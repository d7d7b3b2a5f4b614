"""The budget sweep's tables of the manuals, rendered from a stored sweep: each compared group's heads
against cosine at the pairs each budget saw, the gap per budget in one view, the groups not yet run
named, and the measured time per group."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clipmag.errors import ConfigError
from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.manuals.budget import BLOCKS, VALUES
from clipmag_experiments.manuals.sync import marks
from clipmag_experiments.report.stored import StoredResults

BATCH = 64
STEPS = {"code-search-576": 9, "code-search-2688": 42, "code-search-12544": 196}
QUERIES = 40
GAIN = {"cosine": 0.0, "qnorm": 0.0, "dnorm": 0.1}  # dnorm's lead grows with each budget


def _per_query(head: str, steps: int, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.6, QUERIES)
    lead = GAIN[head] * np.log2(steps / 9 + 1)
    return {f"q{i}": {"NDCG@10": float(v + lead)} for i, v in enumerate(base)}


def _cell(root: Path, group: str, head: str, seed: int) -> None:
    steps = STEPS[group]
    folder = root / "budget" / group / "splade" / head / f"seed{seed}"
    folder.mkdir(parents=True)
    per_query = _per_query(head, steps, seed)
    metric = {
        "NDCG@10": float(np.mean([q["NDCG@10"] for q in per_query.values()])),
        "per_query": per_query,
        "diagnostics": {"document_norm_effect": {"cohens_d": 0.1 * steps / 196}},
    }
    cell = {"group": group, "kind": "text", "model": "splade", "head": head, "variant": None, "seed": seed}
    (folder / "cell.json").write_text(json.dumps({**cell, "argv": [], "evaluations": []}))
    run = {"steps": steps, "seed": seed, "world_size": 1}
    config = {"data": {"batch_size": BATCH}}
    record = build_results(run, HeadRecord({"name": head}), {}, {"stdlib": metric}, {}, {}, config=config)
    record["timings"] = {"train_seconds": 3.0 * steps, "test_seconds": 6.0}
    write_results(record, folder)


@pytest.fixture
def stored(tmp_path) -> StoredResults:
    for group in STEPS:
        for head in GAIN:
            for seed in (0, 1, 2):
                _cell(tmp_path, group, head, seed)
    return StoredResults(tmp_path)


def test_the_budget_table_has_each_budget_in_order_with_pairs_and_epochs(stored):
    table = BLOCKS["budget"](stored).splitlines()
    rows = [line for line in table if line.startswith("| stdlib")]
    assert [r.split(" | ")[2] for r in rows] == ["576 (0.2)", "2,688 (1.1)", "12,544 (5.0)"]
    assert all("▲" in r.split(" | ")[5] for r in rows)  # dnorm above cosine at every budget
    assert "▲" not in "".join(r.split(" | ")[4] for r in rows)  # qnorm equals cosine: no mark
    assert table[-1].startswith("_Not run yet: `scifact-448`, `scifact-2048`, `scifact-9216`")


def test_the_gap_table_shows_the_lead_growing_with_the_budget(stored):
    lines = BLOCKS["budget-gap"](stored).splitlines()
    (dnorm,) = [line for line in lines if "| dnorm |" in line]
    leads = [float(part.split(" [")[0]) for part in dnorm.strip("| ").split(" | ")[3:]]
    expected = [100 * GAIN["dnorm"] * np.log2(s / 9 + 1) for s in STEPS.values()]
    assert leads == pytest.approx(expected, abs=0.01)


def test_the_time_table_sums_each_groups_cells(stored):
    table = BLOCKS["budget-time"](stored)
    assert "| `code-search-12544` | 9 | 88.2 min | 0.9 min |" in table  # 9 cells x 3 s x 196 steps, 9 x 6 s
    assert [line.split(" | ")[0] for line in table.splitlines()[2:5]] == [f"| `{g}`" for g in STEPS]
    assert table.splitlines()[-1].startswith("| all | 27 |")
    assert VALUES["budget-runs"](stored, "").startswith("27 runs at ")
    assert VALUES["budget-hours"](stored, "") == "1.9 hours"  # 111.2 + 2.7 minutes


def test_the_prose_words_are_the_tables_marks_and_a_contradicting_sentence_is_stale(stored):
    verdicts = VALUES
    assert verdicts["budget-verdicts"](stored, "stdlib/splade/dnorm") == "above, above, above"
    assert verdicts["budget-verdicts"](stored, "stdlib/splade/qnorm") == "not separated, not separated, not separated"
    assert verdicts["budget-verdict"](stored, "stdlib/splade/dnorm/middle") == "above"
    lead = [100 * GAIN["dnorm"] * np.log2(s / 9 + 1) for s in STEPS.values()]
    assert verdicts["budget-change"](stored, "stdlib/splade/dnorm/smallest/largest") == f"{lead[2] - lead[0]:+.2f}"
    assert verdicts["budget-difference"](stored, "stdlib/splade/dnorm/largest") == f"{lead[2]:+.2f}"
    # every dnorm gain survives Holm over the table's 6 tests; qnorm equals cosine everywhere
    assert verdicts["budget-tests"](stored, "") == "6"
    assert verdicts["budget-survivors"](stored, "") == "3 of 6"
    assert verdicts["budget-table-starts"](stored, "above") == "3, all from splade"
    assert verdicts["budget-table-marked"](stored, "below") == "none"
    assert "p_all=" in BLOCKS["budget"](stored) and "▲†" in BLOCKS["budget"](stored)
    sentence = "dnorm is <!-- value:budget-verdicts:stdlib/splade/dnorm -->{}<!-- /value --> on stdlib"
    assert [m.name for m in stale_marks_of(sentence.format("level, above, above"), stored)] == [
        "budget-verdicts:stdlib/splade/dnorm"
    ]
    assert stale_marks_of(sentence.format("above, above, above"), stored) == []
    with pytest.raises(ConfigError, match="budget 'biggest': one of smallest, middle, largest"):
        marks("<!-- value:budget-verdict:stdlib/splade/dnorm/biggest -->x<!-- /value -->", "m.md", stored)


def stale_marks_of(text: str, stored: StoredResults) -> list:
    return [m for m in marks(text, "manual.md", stored) if m.written != m.rendered]


def test_the_plan_table_counts_what_each_cell_trained_at_the_stated_rates(stored):
    """A continued cell counts only the pairs it added to the cell it continues."""
    (stored.root / "budget" / "sweep.json").write_text(
        json.dumps({"starts": [{"config": {"plan": {"cpu_pairs_per_second": {"splade": 30}}}}]})
    )
    for earlier, group in zip(STEPS, list(STEPS)[1:]):
        for cell_file in (stored.root / "budget" / group).rglob("cell.json"):
            cell = json.loads(cell_file.read_text())
            cell["continues"] = f"runs/budget/{earlier}/splade/{cell['head']}/seed{cell['seed']}"
            cell_file.write_text(json.dumps(cell))
    stored = StoredResults(stored.root)
    pairs = {group: 9 * (steps - before) * BATCH for (group, steps), before in zip(STEPS.items(), (0, 9, 42))}
    lines = BLOCKS["budget-plan"](stored).splitlines()
    for group, n in pairs.items():
        assert f"| {group} | {n:,} | {n / 30 / 3600:.2f} |" in lines
    assert lines[-1] == f"| total | {sum(pairs.values()):,} | {sum(pairs.values()) / 30 / 3600:.2f} |"
    assert VALUES["budget-plan-hours"](stored, "") == f"{sum(pairs.values()) / 30 / 3600:.2f}"
    assert VALUES["budget-plan-rates"](stored, "") == "splade 30"


def test_the_stored_plan_is_the_one_the_plan_command_printed_before_the_run():
    """`clipmag-sweep plan` on configs/sweeps/budget.yaml printed these figures before the run; the
    stored cells give them back (18 cells a budget group, each adding its budget minus the one below)."""
    table = BLOCKS["budget-plan"](StoredResults(Path(__file__).resolve().parents[1] / "results"))
    assert f"| code-search-12544 | {18 * (12544 - 2688):,} | 1.33 |" in table
    assert f"| scifact-9216 | {18 * (9216 - 2048):,} | 0.97 |" in table
    assert table.splitlines()[-1] == "| total | 440,064 | 3.31 |"
