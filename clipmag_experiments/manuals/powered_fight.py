"""The powered fight's tables and words in the manuals (``results/powered_fight``), rendered from its cells.

``configs/sweeps/powered_fight.yaml`` asks whether dot, qnorm or dnorm beats, trails or matches
cosine when every head's learning rate is chosen at the budget it is compared at (two seeds, a
1,000-query dev set), the in-domain test sets hold 1,000 queries, and "level" is an equivalence test
within the protocol's margin. Everything here reads the stored cells, so a sentence of the docs
cannot say more than the table:

- ``powered-fight``: per test set and start, the step-0 row (each head scoring the untrained start)
  and the trained row (nDCG@10 over seeds), each head against cosine read under Holm over the whole
  table: above or below (†, both tests), equivalent within the margin (≈) or undecided, with the
  difference, its interval and the MDE at the table's level;
- ``powered-fight-from-start``: each head's change from its own step-0 score, tested alike in a
  family of its own (rose, fell, held within the margin, undecided), with the pairs each seed's
  tested checkpoint saw: whether a difference from cosine is the head rising or cosine falling;
- ``powered-fight-choices``: each start and head's dev-chosen rate, the grid read, and the margin
  over the runner-up with its paired standard error over the dev queries (the ``retrieval``
  evaluation of the tuning cells), so a choice inside the noise reads as one;
- the values ``pf-*`` of the prose: the tallies, verdicts, MDE ranges, the machine the records name,
  and how much of the protocol is stored (the sweep runs over many sittings).

Until the compared group has finished cells, the blocks say what is stored and nothing more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from clipmag.registry.evaluations import get_evaluation
from clipmag.results.marks import equivalence_mark, family_mark, family_tally, family_verdict
from clipmag.results.record import RESULTS_FILE
from clipmag.results.significance import Comparison
from clipmag_experiments.design.grid import EVALUATIONS_DIR
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.manuals.positive_regime import order
from clipmag_experiments.report.collect import CellResult, runs_count
from clipmag_experiments.report.comparison import holm_over_table, protocol_comparison
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep, runs_value, time_value

__all__ = [
    "BLOCKS",
    "VALUES",
    "SWEEP",
    "HEADS",
    "compared",
    "compared_rows",
    "interval",
    "progress",
    "said",
    "status",
    "table_rows",
]

SWEEP = "powered_fight"
STARTS = ("splade", "minilm-dot", "minilm")
HEADS = ("cosine", "dot", "qnorm", "dnorm")
FIGHT, TUNE, START = "fight", "tune", "start"  # the protocol's compared, selection and step-0 groups
TEST_SETS = {
    "pypi-test": "PyPI test packages",
    "stdlib": "stdlib",
    "sklearn": "scikit-learn",
    "scifact": "SciFact",
    "cranfield": "Cranfield",
    "nfcorpus": "NFCorpus",
}
IN_DOMAIN = ("pypi-test", "stdlib", "sklearn")  # code search, as the training pairs; the rest is out of domain
DEV_EVALUATION = "dev"  # the tuning cells' retrieval evaluation: every dev query's nDCG@10
METRIC = "NDCG@10"
# a head's change from its start in the words of a move (family_verdict's words against the start)
MOVES = {"above": "rose", "below": "fell", "equivalent": "held", "undecided": "undecided"}


def _margin(sweep: StoredSweep) -> float | None:
    """The equivalence margin the protocol fixed before its first cell (``sweep.json``)."""
    statement = protocol_comparison(sweep.folder) or {}
    margin = statement.get("margin")
    return float(margin) if margin is not None else None


def _ordered(rows: list[StartRow]) -> list[StartRow]:
    return sorted(rows, key=lambda r: (order(r.dataset, list(TEST_SETS)), order(r.start, STARTS)))


def compared_rows(sweep: StoredSweep, groups: tuple[str, ...] = (FIGHT,)) -> list[StartRow]:
    """The compared rows of ``groups`` by test set and start, each head's test against cosine under
    Holm over the whole table and each head's change from its start under Holm over those changes,
    both with the protocol's equivalence margin: the families a sentence about the table rests on
    (a sweep on this protocol with several compared groups, as the ladder's budgets, is one table)."""

    def compute() -> list[StartRow]:
        rows = _ordered([r for r in sweep.start_rows if r.group in groups])
        margin = _margin(sweep)
        return holm_over_table(holm_over_table(rows, margin), margin, "from_start")

    return sweep.derived(f"compared-rows:{','.join(groups)}", compute)


def table_rows(sweep: StoredSweep) -> list[StartRow]:
    """The powered fight's compared rows (:func:`compared_rows` of its ``fight`` group)."""
    return compared_rows(sweep)


def compared(rows: list[StartRow], attribute: str = "comparison") -> list[Comparison]:
    """Every tested comparison of ``rows``: against cosine, or (``from_start``) each head's change
    from its start; the family its tally is read in."""
    return [getattr(h, attribute) for r in rows for h in r.heads.values() if getattr(h, attribute) is not None]


def _planned(sweep: StoredSweep) -> Counter:
    """Cells per group of the protocol the sweep recorded (``sweep.json``), grid extensions aside
    (they run only when a choice lands on an edge): models x heads x variants x seeds."""
    starts = read_protocol(sweep.folder)
    groups = (starts[-1].get("config") or {}).get("groups", []) if starts else []
    return Counter(
        {
            g["name"]: len(g.get("models") or [None])
            * len(g.get("heads") or [None])
            * len(g.get("variants") or [None])
            * len(g.get("seeds") or [0])
            for g in groups
        }
    )


def progress(stored: StoredResults) -> str | None:
    """How much of the protocol is stored, ``4 of 12 step-0 cells, 10 of 72 tuning runs and 0 of 36
    compared runs``, or None once every planned cell is (extensions stored are counted beside)."""
    sweep = stored.sweep(SWEEP)
    planned = _planned(sweep)
    if not planned:
        raise ValueError(f"{sweep.folder}: no protocol record (sweep.json) to count the planned cells from")
    done = Counter(c.cell["group"] for c in sweep.cells if not c.cell.get("extends"))
    extensions = sum(1 for c in sweep.cells if c.cell.get("extends"))
    if all(done[group] >= count for group, count in planned.items()):
        return None
    words = {START: "step-0 cells", TUNE: "tuning runs", FIGHT: "compared runs"}
    parts = [f"{done[g]} of {planned[g]} {words.get(g, g)}" for g in planned]
    text = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    return text + (f" (and {extensions} grid extensions)" if extensions else "")


def status(stored: StoredResults) -> str | None:
    """The README row's words while no compared run is stored: how much of the protocol is, so a
    sweep half-way through its tuning does not read as one not started (None before any cell)."""
    if not any((stored.root / SWEEP).glob(f"*/*/*/*/{RESULTS_FILE}")):
        return None
    left = progress(stored)
    return f"running over sittings, nothing compared yet: {left} stored" if left else None


def _stored_note(stored: StoredResults) -> list[str]:
    left = progress(stored)
    return [f"\n_Stored so far: {left}; the rest runs in later sittings._"] if left else []


def _fight_rows(stored: StoredResults) -> list[StartRow]:
    """The compared rows, or none while the stored sweep has no finished compared cell."""
    sweep = stored.sweep(SWEEP)
    if not any(c.cell["group"] == FIGHT for c in sweep.cells):
        return []
    return table_rows(sweep)


def interval(c: Comparison) -> str:
    """``-0.92 [-1.30, -0.55], MDE 0.80``: the difference x100, its 95% interval and the MDE at the
    table's Holm level."""
    mde = c.detectable_family if c.detectable_family is not None else c.detectable
    return f"{100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}], MDE {100 * mde:.2f}"


def said(c: Comparison) -> str:
    """``below†``, ``equivalent≈`` or ``undecided``: the comparison under the whole table's Holm."""
    return family_verdict(c) + family_mark(c) + equivalence_mark(c)


def _trained_cell(row: StartRow, head: str) -> str:
    result = row.heads.get(head)
    if result is None:
        return "-"
    text = f"{100 * result.mean:.2f} ± {100 * result.std:.2f}"
    c = result.comparison
    return text if c is None else f"{text}: **{said(c)}** ({interval(c)})"


def _untrained_cell(row: StartRow, head: str) -> str:
    return f"{100 * row.untuned[head]:.2f}" if head in row.untuned else "-"


def fight_table(stored: StoredResults) -> str:
    """Per test set and start: the step-0 row, then the trained row, each head against cosine."""
    rows = _fight_rows(stored)
    if not rows:
        return "_Not run yet: no compared run is stored._" + "".join(_stored_note(stored))
    lines = ["| test set | start | row | " + " | ".join(HEADS) + " |", "|---" * (len(HEADS) + 3) + "|"]
    for row in rows:
        label = f"{TEST_SETS.get(row.dataset, row.dataset)} ({len(_queries(row)):,} queries)"
        untrained = " | ".join(_untrained_cell(row, h) for h in HEADS)
        lines.append(f"| {label} | {row.start} | step 0 | {untrained} |")
        lines.append(f"| | | trained | {' | '.join(_trained_cell(row, h) for h in HEADS)} |")
    return "\n".join(lines + _stored_note(stored))


def _queries(row: StartRow) -> set[str]:
    return {q for result in row.heads.values() for scores in result.per_query.values() for q in scores}


def _pairs(result: HeadResult) -> str:
    return " / ".join(f"{p:,}" for p in result.pairs_seen) or "-"


def _moved_cell(row: StartRow, head: str) -> str:
    result = row.heads.get(head)
    if result is None or result.from_start is None:
        return "-"
    c = result.from_start
    word = MOVES[family_verdict(c)] + family_mark(c) + equivalence_mark(c)
    return f"**{word}** {interval(c)}; pairs seen {_pairs(result)}"


def from_start_table(stored: StoredResults) -> str:
    """Per test set and start: each head's change from its own step-0 score, with the pairs seen."""
    rows = _fight_rows(stored)
    if not rows:
        return "_Not run yet: no compared run is stored._"
    lines = ["| test set | start | " + " | ".join(HEADS) + " |", "|---" * (len(HEADS) + 2) + "|"]
    for row in rows:
        cells = " | ".join(_moved_cell(row, h) for h in HEADS)
        lines.append(f"| {TEST_SETS.get(row.dataset, row.dataset)} | {row.start} | {cells} |")
    return "\n".join(lines)


def _dev_scores(cell: CellResult) -> dict[str, float]:
    """One tuning cell's nDCG@10 per dev query, from its ``retrieval`` evaluation (empty: not stored)."""
    folder = cell.directory / EVALUATIONS_DIR / DEV_EVALUATION
    if not (folder / RESULTS_FILE).is_file():
        return {}
    kinds = {e["name"]: e["kind"] for e in cell.cell.get("evaluations", [])}
    result = get_evaluation(kinds.get(DEV_EVALUATION, "retrieval")).read(folder)
    if len(result.outcomes) != 1:
        raise ValueError(f"{folder}: {len(result.outcomes)} data sets in the dev evaluation, expected the dev split")
    return {q: float(v[METRIC]) for q, v in next(iter(result.outcomes.values())).items()}


def _seed_mean(cells: list[CellResult]) -> dict[str, float]:
    """Each dev query's nDCG@10, mean over the seeds of one rate (queries every seed scored)."""
    scores = [_dev_scores(c) for c in cells]
    if not scores or not all(scores):
        return {}
    shared = set.intersection(*(set(s) for s in scores))
    return {q: float(np.mean([s[q] for s in scores])) for q in shared}


def choice_margin(sweep: StoredSweep, start: str, head: str, chosen: str, runner_up: str) -> tuple[float, float, int]:
    """The chosen rate's dev nDCG@10 minus the runner-up's (x100, queries' scores averaged over the
    tuning seeds), its paired standard error over the dev queries, and how many queries."""
    by_variant = {
        variant: _seed_mean(
            [
                c
                for c in sweep.cells
                if (c.cell["group"], c.cell["model"], c.cell.get("head"), str(c.cell.get("variant")))
                == (TUNE, start, head, variant)
            ]
        )
        for variant in (chosen, runner_up)
    }
    first, second = by_variant[chosen], by_variant[runner_up]
    queries = sorted(set(first) & set(second))
    if not queries:
        raise ValueError(f"{sweep.folder}: no dev evaluation stored for {start}/{head} at {chosen} and {runner_up}")
    differences = np.array([first[q] - second[q] for q in queries])
    se = float(np.std(differences, ddof=1) / np.sqrt(len(differences))) if len(differences) > 1 else float("nan")
    return 100 * float(differences.mean()), 100 * se, len(queries)


def _rate(variant: str) -> str:
    return variant.removeprefix("lr")


def _choices(sweep: StoredSweep) -> dict[tuple[str, str], dict]:
    """(start, head) -> the choice its compared cells recorded (``cell.json`` ``chosen``)."""
    found = {}
    for c in sweep.cells:
        if c.cell["group"] == FIGHT and c.cell.get("chosen"):
            found.setdefault((c.cell["model"], c.cell["head"]), c.cell["chosen"])
    return dict(sorted(found.items(), key=lambda i: (order(i[0][0], STARTS), order(i[0][1], HEADS))))


def choices_table(stored: StoredResults) -> str:
    """Each start and head's chosen rate, the grid read, dev nDCG@10 of the chosen rate and its
    runner-up (mean of the tuning seeds), and the margin with its paired SE over dev queries."""
    sweep = stored.sweep(SWEEP)
    found = _choices(sweep)
    if not found:
        return "_Not chosen yet: no compared run is stored._"
    lines = [
        "| start | head | rate chosen (grid read) | dev, chosen | runner-up | margin ± paired SE (dev queries) |",
        "|---|---|---|---|---|---|",
    ]
    for (start, head), chosen in found.items():
        scores = sorted(chosen["scores"].items(), key=lambda kv: -kv[1])
        grid = f"({', '.join(_rate(v) for v in chosen['grid'])})" + (" **edge**" if chosen.get("at_grid_edge") else "")
        if len(scores) < 2:
            lines.append(f"| {start} | {head} | {_rate(chosen['variant'])} {grid} | - | - | - |")
            continue
        (best, best_score), (runner, runner_score) = scores[0], scores[1]
        margin, se, n = choice_margin(sweep, start, head, best, runner)
        lines.append(
            f"| {start} | {head} | {_rate(best)} {grid} | {100 * best_score:.2f} | "
            f"{_rate(runner)}: {100 * runner_score:.2f} | {margin:+.2f} ± {se:.2f} ({n:,}) |"
        )
    return "\n".join(lines)


def _rows_for(stored: StoredResults, argument: str, value: str) -> list[StartRow]:
    """The compared rows an argument names: all (``""``), ``in-domain``, ``out-of-domain``, a start
    or a test set."""
    rows = _fight_rows(stored)
    if argument in ("", "all"):
        return rows
    if argument in ("in-domain", "out-of-domain"):
        return [r for r in rows if (r.dataset in IN_DOMAIN) == (argument == "in-domain")]
    if argument in STARTS:
        return [r for r in rows if r.start == argument]
    if argument in TEST_SETS:
        return [r for r in rows if r.dataset == argument]
    raise ValueError(
        f"value {value}: expected nothing, in-domain, out-of-domain, a start ({', '.join(STARTS)}) or a test set "
        f"({', '.join(TEST_SETS)}), got {argument!r}"
    )


def tally(stored: StoredResults, argument: str = "") -> str:
    """The heads against cosine under Holm over the whole table (``1 above†, 2 below†, 20 equivalent≈
    and 13 undecided (MDE 0.61-3.10), of 36``), for the rows ``argument`` names; ``not run yet``
    before the compared group has a stored run."""
    tested = compared(_rows_for(stored, argument, "pf-tally"))
    return family_tally(tested) if tested else "not run yet"


def moves(stored: StoredResults, argument: str = "") -> str:
    """The heads' changes from their starts under Holm over those changes, in the words of a move
    (``12 rose†, 3 fell†, 10 held≈ and 23 undecided (MDE ...), of 48``)."""
    tested = compared(_rows_for(stored, argument, "pf-moves"), "from_start")
    if not tested:
        return "not run yet"
    return family_tally(tested, (MOVES["above"], MOVES["below"], MOVES["equivalent"]))


def detectable(stored: StoredResults, argument: str = "") -> str:
    """``0.61-1.20``: the smallest and largest MDE x100 at the whole table's Holm level over the rows
    ``argument`` names (what a comparison left undecided could still hide)."""
    tested = compared(_rows_for(stored, argument, "pf-mde"))
    mdes = sorted(100 * c.detectable_family for c in tested if c.detectable_family is not None)
    return f"{mdes[0]:.2f}-{mdes[-1]:.2f}" if mdes else "not run yet"


def _head(stored: StoredResults, argument: str, value: str) -> HeadResult:
    parts = argument.split("/")
    if len(parts) != 3:
        raise ValueError(f"value {value}: expected DATASET/START/HEAD, got {argument!r}")
    dataset, start, head = parts
    for row in _fight_rows(stored):
        if (row.dataset, row.start) == (dataset, start) and head in row.heads:
            return row.heads[head]
    raise ValueError(f"{SWEEP}: no compared {head} of {start} on {dataset}")


def verdict(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD``: ``above†`` / ``below†`` / ``equivalent≈`` / ``undecided`` against cosine,
    with the difference, its interval and the MDE at the table's level."""
    c = _head(stored, argument, "pf-verdict").comparison
    if c is None:
        raise ValueError(f"value pf-verdict: {argument} has no test against cosine (cosine is the baseline)")
    return f"{said(c)} ({interval(c)})"


def machine(stored: StoredResults, argument: str = "") -> str:
    """Per start, the CPUs its trained cells' records name, with their bf16 units and the precision
    the cells computed in (``splade: AMD EPYC, AVX-512 BF16 without AMX, bf16 autocast (40 runs)``):
    what the speeds and the hours were measured on, and each start's table's one precision (the
    sweep refuses a start that mixes two; the amended protocol runs the MiniLM starts in fp32)."""
    found: dict[str, Counter] = {}
    for c in stored.sweep(SWEEP).trained:
        numerics = c.results.get("numerics") or {}
        units = numerics.get("cpu_bf16") or []
        bf16 = (
            "AVX-512 BF16 with AMX"
            if "amx_bf16" in units
            else "AVX-512 BF16 without AMX"
            if "avx512_bf16" in units
            else "no bf16 units"
        )
        precision = "bf16 autocast" if numerics.get("autocast") == "bfloat16" else numerics.get("autocast", "fp32")
        cpu = numerics.get("cpu", "an unnamed CPU")
        found.setdefault(c.cell["model"], Counter())[f"{cpu}, {bf16}, {precision}"] += 1
    return "; ".join(
        f"{start}: " + " and ".join(f"{name} ({runs_count(runs)})" for name, runs in found[start].most_common())
        for start in sorted(found, key=lambda start: order(start, STARTS))
    )


def stored_so_far(stored: StoredResults, argument: str = "") -> str:
    """How much of the protocol is stored, or ``every planned cell``."""
    return progress(stored) or "every planned cell"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "powered-fight": fight_table,
    "powered-fight-from-start": from_start_table,
    "powered-fight-choices": choices_table,
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "pf-tally": tally,
    "pf-moves": moves,
    "pf-mde": detectable,
    "pf-verdict": verdict,
    "pf-machine": machine,
    "pf-stored": stored_so_far,
    "pf-runs": runs_value(SWEEP),
    "pf-hours": time_value(SWEEP, "hours"),
}
