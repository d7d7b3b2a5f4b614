"""The manuals' speed tables (``results/speed``), rendered from the benchmarks' JSON records.

``benchmarks/profile_step.py`` writes where a training step's time goes, per operator kind;
``benchmarks/bench_train_text.py --output`` writes ours against the peer and, with ``--before``,
ours with a speed-up switched off, in one run; ``bench_train_clip.py``, ``bench_encode.py`` and
``bench_chunked.py`` write ours against their peers the same way (``--output``), and
``bench_compile.py`` torch.compile against eager, ``bench_search.py`` exact search and
``bench_rag.py`` the RAG reader against theirs, ``bench_packed_cells.py`` packed sweep cells against
one cell with every thread. Each record names
the CPU and the code state it was measured at, and the tables print both, so a figure never loses
the machine it belongs to. ``tests.json`` holds the wall clocks of ``make test`` and ``make
test-slow`` measured on a fresh clone by ``benchmarks/bench_suite.py``, one entry per CPU class,
which the README quotes.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from clipmag.results.provenance import describe_code
from clipmag_experiments.report.stored import StoredResults, cited_code, cpu_with_units

__all__ = ["BLOCKS", "VALUES"]

FOLDER = "speed"
# the operator kinds of benchmarks/profile_step.py, in the order its rows print them
KINDS = (
    "gemm",
    "attention",
    "norm+act",
    "elementwise",
    "casts+copies",
    "optimizer+clip",
    "embedding grad",
    "autograd",
    "tokenise+data",
    "python+other",
)


def _record(stored: StoredResults, name: str) -> dict[str, Any]:
    path = Path(stored.root) / FOLDER / name
    return json.loads(path.read_text(encoding="utf-8"))


def _measured_on(record: dict[str, Any]) -> str:
    return f"Measured on {record['cpu']}, {record['threads']} threads, at {describe_code(record['code'])}."


def profile_table(stored: StoredResults) -> str:
    """Per configuration: the unprofiled step time, then each kind's share of the profiled step."""
    record = _record(stored, "profile_step.json")
    lines = [
        "| configuration | step (ms) | " + " | ".join(KINDS) + " |",
        "|---|---:|" + "---:|" * len(KINDS),
    ]
    for row in record["rows"]:
        total = row["profiled_step_ms"]
        shares = " | ".join(f"{row['kinds_ms'].get(k, 0.0) / total:.0%}" for k in KINDS)
        lines.append(f"| {row['config']} | {row['step_ms']:.0f} | {shares} |")
    return "\n".join(lines) + "\n\n" + _measured_on(record)


def _median_range(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def _comparison(record: dict[str, Any], rates: str, unit: str, work: str) -> list[str]:
    """Every side's rate, the ratios (medians of per-round ratios, with range), then the FLOP rate
    of our ``work`` (a step, an encode) against a GEMM measured in the same run."""
    lines = [f"| side | {unit}, median (range) |", "|---|---:|"]
    lines += [f"| {side} | {_median_range(values, 1)} |" for side, values in record[rates].items()]
    lines += ["", "| ratio | median (range) |", "|---|---:|"]
    lines += [f"| {name} | {_median_range(values, 2)} |" for name, values in record["ratios"].items()]
    lines += ["", f"| our {work} | GFLOP/s | of a 2048² GEMM now |", "|---|---:|---:|"]
    lines += [
        f"| {side} | {rate['achieved_gflops']:.0f} | {rate['of_gemm']:.0%} |"
        for side, rate in record.get("flop_rates", {}).items()
    ]
    return lines


def _training_table(record: dict[str, Any], shape: str) -> str:
    """A training benchmark's samples per second and ratios, its settings, where it was measured."""
    return (
        "\n".join(_comparison(record, "samples_per_s", "samples/s", "step")) + f"\n\n{shape}. " + _measured_on(record)
    )


def _before(settings: dict[str, Any]) -> str:
    """The ``--before`` train settings a record's "before" sides ran with ("" when none)."""
    return ", ".join(f"train.{k}={v}" for k, v in settings.get("before", {}).items())


def train_text_table(stored: StoredResults, name: str = "train_text.json") -> str:
    """Text training: samples per second of every side (ours, the peer, ours "before"), the ratios."""
    record = _record(stored, name)
    settings = record["settings"]
    before = _before(settings) or "none"
    shape = (
        f"batch {settings['batch_size']}, max length {settings['max_length']}, {settings['steps']} timed steps after "
        f'{settings["warmup"]} warm-up, {settings["rounds"]} rotating rounds; "before": {before}'
    )
    return _training_table(record, shape)


def train_clip_table(stored: StoredResults) -> str:
    """CLIP training against open_clip_train: samples per second of every side, the ratios."""
    record = _record(stored, "train_clip.json")
    settings = record["settings"]
    shape = (
        f"{settings['model']}, batch {settings['batch_size']}, {settings['steps']} steps per run read from each "
        f"trainer's log every {settings['log_every']} steps (first window dropped), {settings['workers']} loader "
        f"workers, {settings['rounds']} rotating rounds"
    )
    if settings.get("before"):
        shape += f'; "before": {_before(settings)}'
    return _training_table(record, shape)


def encode_table(stored: StoredResults) -> str:
    """Corpus encoding against ``SentenceTransformer.encode``: documents per second, the ratios."""
    record = _record(stored, "encode.json")
    settings, agreement = record["settings"], record["agreement"]
    shape = (
        f"{settings['n_docs']} documents, batch {settings['batch_size']}, max length {settings['max_length']}, "
        f"{settings['rounds']} rotating rounds after one warm-up; ours and theirs differ by at most "
        f"{agreement['max_abs_diff_fp32']:.1e} at fp32"
    )
    if "min_cosine_bf16_fp32" in agreement:
        shape += f", ours bf16 vs fp32 cosine >= {agreement['min_cosine_bf16_fp32']:.5f}"
    return "\n".join(_comparison(record, "docs_per_s", "docs/s", "encode")) + f"\n\n{shape}. " + _measured_on(record)


def chunked_table(stored: StoredResults) -> str:
    """Gradient caching against ``CachedMultipleNegativesRankingLoss``, per chunk size: samples per
    second and peak memory of each side, and ours / theirs of both; medians over the rounds (range)."""
    record = _record(stored, "chunked.json")
    settings = record["settings"]
    lines = [
        "| chunk | ours samples/s | ST samples/s | samples/s ours/ST | ours peak MB | ST peak MB | peak ours/ST |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for chunk, sides in record["chunks"].items():
        ours, theirs, ratios = sides["ours"], sides["theirs"], record["ratios"][chunk]
        lines.append(
            f"| {chunk} | {_median_range(ours['samples_per_s'], 2)} | {_median_range(theirs['samples_per_s'], 2)} | "
            f"{_median_range(ratios['samples_per_s ours/ST'], 2)} | {statistics.median(ours['peak_mb']):.0f} | "
            f"{statistics.median(theirs['peak_mb']):.0f} | {_median_range(ratios['peak_mb ours/ST'], 2)} |"
        )
    shape = (
        f"Global batch {settings['batch_size']}, max length {settings['max_length']}, {settings['steps']} timed steps "
        f"after one warm-up, fp32, one subprocess per configuration and round, {settings['rounds']} rounds with the "
        "side that goes first alternating, medians (range); peak memory is the resident set's rise during the run"
    )
    return "\n".join(lines) + f"\n\n{shape}. " + _measured_on(record)


def _inductor_cache(files: int) -> str:
    """A cold compile takes minutes, a warm one seconds: say which the compile times are."""
    return (
        "inductor's on-disk cache empty at the start"
        if files == 0
        else f"{files} files in inductor's cache at the start"
    )


def compile_table(stored: StoredResults) -> str:
    """torch.compile against eager, per workload: compile time, difference, seconds and speed-up."""
    record = _record(stored, "compile.json")
    lines = [
        "| workload | compile (s) | eager s/call | compiled s/call | compiled / eager | max diff (largest value) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, figures in record["workloads"].items():
        seconds = figures["seconds"]
        lines.append(
            f"| {name} | {figures['compile_s']:.0f} | {_median_range(seconds['eager'], 3)} | "
            f"{_median_range(seconds['compiled'], 3)} | {_median_range(figures['speedup'], 2)} | "
            f"{figures['max_abs_diff']:.1e} ({figures['largest']:.1e}) |"
        )
    shape = (
        f"{record['precision']} (clipmag's default precision on this CPU), {record['settings']['rounds']} alternating "
        f"rounds, medians of the per-round figures (range); compile time is the first compiled call's, with "
        f"{_inductor_cache(record['cache_files_at_start'])}"
    )
    return "\n".join(lines) + f"\n\n{shape}. " + _measured_on(record)


def search_table(stored: StoredResults) -> str:
    """Exact top-k search against blocked torch and ``semantic_search``, per case: each side's
    seconds, the ratios, peak memory and how often the top-10 lists agree."""
    record = _record(stored, "search.json")
    sides = list(record["cases"][0]["seconds"])
    header = (
        ["case", "top-k"]
        + [f"{side} s" for side in sides]
        + list(record["cases"][0]["ratios"])
        + [f"peak MB ({' / '.join(sides)})", "identical top-10"]
    )
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for case in record["cases"]:
        seconds = " | ".join(_median_range(case["seconds"][side], 2) for side in sides)
        ratios = " | ".join(_median_range(values, 2) for values in case["ratios"].values())
        peaks = " / ".join(f"{case['peak_mb'][side]:.0f}" for side in sides)
        lines.append(
            f"| {case['case']}, {case['queries']:,} x {case['docs']:,} x {case['dim']} | {case['k']} | {seconds} | "
            f"{ratios} | {peaks} | {case['identical_top10']:.0%} |"
        )
    settings = record["settings"]
    shape = (
        f"{settings['rounds']} rotating rounds, medians of the per-round figures (range); ours streams the "
        f"memory-mapped corpus under memory_gb={settings['memory_gb']}"
    )
    return "\n".join(lines) + f"\n\n{shape}. " + _measured_on(record)


def rag_table(stored: StoredResults) -> str:
    """The RAG reader against a transformers ``pipeline``: questions per second and the ratio."""
    record = _record(stored, "rag.json")
    lines = ["| side | questions/s, median (range) |", "|---|---:|"]
    lines += [f"| {side} | {_median_range(values, 3)} |" for side, values in record["questions_per_s"].items()]
    lines += ["", "| ratio | median (range) |", "|---|---:|"]
    lines += [f"| {name} | {_median_range(values, 2)} |" for name, values in record["ratios"].items()]
    settings, (low, high), (agree, total) = record["settings"], record["prompt_tokens"], record["identical_answers"]
    shape = (
        f"Reader {record['reader']}, {settings['questions']} prompts of {low}-{high} tokens, "
        f"{settings['max_new_tokens']} new tokens, greedy, {settings['rounds']} rotating rounds; identical "
        f"first-line answers {agree}/{total}"
    )
    return "\n".join(lines) + f"\n\n{shape}. " + _measured_on(record)


def packed_table(stored: StoredResults) -> str:
    """Per model: one training run with every thread against ``pack`` runs sharing them
    (``bench_packed_cells.py``): training samples per second of all the side's runs together (the
    step alone) and whole runs per hour (start, load and steps), medians over the rounds (range),
    and packed / single of both. The step column is what a sweep of long cells gains."""
    record = _record(stored, "packed_cells.json")
    single, packed = record["sides"]["single"], record["sides"]["packed"]
    lines = [
        f"| model | samples/s, {single} | samples/s, {packed} | {packed} / {single} | "
        f"runs/h, {single} | runs/h, {packed} | {packed} / {single} |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for model, found in record["models"].items():
        cells = []
        for key in ("samples_per_s", "runs_per_hour"):
            single_rates, packed_rates = ([run[key] for run in found["sides"][side]] for side in ("single", "packed"))
            cells += [_median_range(single_rates, 1), _median_range(packed_rates, 1)]
            cells.append(_median_range(found["ratios"][key], 2))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    settings = record["settings"]
    precision = "bf16 autocast" if record.get("cpu_bf16") else "fp32"
    shape = (
        f"Each run {settings['steps']} steps of the sweeps' step (batch 64, lengths 32/64, `precision=auto`: "
        f"{precision} here), "
        f"the step rate after {settings['warmup']} warm-up steps; {settings['rounds']} rounds with the side that "
        "goes first alternating"
    )
    machine = cpu_with_units(record["cpu"], record.get("cpu_bf16", []))
    measured = f"Measured on {machine}, {record['threads']} threads, at {describe_code(record['code'])}."
    return "\n".join(lines) + f"\n\n{shape}. {measured}"


def suite_minutes(stored: StoredResults, target: str) -> str:
    """How long ``make <target>`` took from a fresh clone, set-up included, on each CPU class measured:
    read from ``tests.json`` (``benchmarks/bench_suite.py``), one entry per class. An entry written
    before the record named the bf16 units gives the CPU's model name alone."""
    runs = [run for run in _record(stored, "tests.json")["runs"] if target in run["wall_seconds"]]
    if not runs:
        raise KeyError(f"suite-minutes:{target}: no run of make {target} in {FOLDER}/tests.json")
    return "; ".join(
        f"{run['wall_seconds'][target] / 60:.1f} minutes at {cited_code(run['code'])} on "
        f"{cpu_with_units(run['cpu'], run['cpu_bf16']) if 'cpu_bf16' in run else run['cpu']}, {run['cores']} cores"
        for run in runs
    )


def bf16_gain(stored: StoredResults, record_name: str) -> str:
    """How much faster our bf16 side ran than our fp32 side in one benchmark record (``encode``,
    ``train_text``, ``train_clip``, ...): the median of the per-round ratios, as "1.84x"."""
    record = _record(stored, f"{record_name}.json")
    rates = record["docs_per_s" if "docs_per_s" in record else "samples_per_s"]
    ratios = [bf16 / fp32 for bf16, fp32 in zip(rates["clipmag bf16"], rates["clipmag fp32"])]
    return f"{statistics.median(ratios):.2f}x"


VALUES = {"suite-minutes": suite_minutes, "bf16-gain": bf16_gain}

BLOCKS = {
    "speed-profile": profile_table,
    "speed-train-text": train_text_table,
    "speed-train-text-long": lambda stored: train_text_table(stored, "train_text_long.json"),
    "speed-train-clip": train_clip_table,
    "speed-encode": encode_table,
    "speed-chunked": chunked_table,
    "speed-compile": compile_table,
    "speed-search": search_table,
    "speed-rag": rag_table,
    "speed-packed": packed_table,
}
