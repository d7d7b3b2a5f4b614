"""Read a sweep's run folders into tidy rows: one (cell, dataset, metric, value) per row.

A cell folder holds ``cell.json`` (written by the sweep: group, kind, model, head, variant, seed)
and ``results.json`` (written by the run driver, ``clipmag.results.record``): metrics per dataset and the
head record of the tested model, from which the report takes the head (a CLIP variant set by
``--config`` names no head in its cell). Evaluations the sweep attached to a cell (``cell.json``
names them) are read through their registered reader (:mod:`clipmag.registry.evaluations`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.errors import ConfigError
from clipmag.registry.evaluations import get_evaluation
from clipmag.results.record import RESULTS_FILE, read_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.design.grid import CELL_FILE, EVALUATIONS_DIR

TEXT_METRICS = (
    "NDCG@10",
    "Recall@1",
    "MRR@10",
    "Recall@100",
    "MAP@100",
    "spearman",
    "pearson",
    "spearman_reversed",
    "pearson_reversed",
    "asymmetry_gap",
)
CLIP_METRICS = (
    "i2t_r1_cosine",
    "t2i_r1_cosine",
    "i2t_r1_head",
    "t2i_r1_head",
    "i2t_r5_head",
    "t2i_r5_head",
    "i2t_r10_head",
    "t2i_r10_head",
    "image_norm_d",
    "text_norm_d",
    "zeroshot_acc1_cosine",
    "zeroshot_acc1_head",
    "zeroshot_mean_per_class_recall_cosine",  # beside top-1: the classes may be skewed (the emoji set's are)
    "zeroshot_mean_per_class_recall_head",
)


@dataclass
class Row:
    group: str
    kind: str
    model: str
    config: str  # the head, or the variant name
    seed: int
    dataset: str
    metric: str
    value: float


@dataclass
class CellResult:
    directory: Path
    cell: dict[str, Any]
    results: dict[str, Any]

    @property
    def head(self) -> str:
        """The head the tested model scored with, from its head record."""
        return HeadRecord.from_dict(self.results["head"], source=f"{self.directory}/results.json").head_name

    @property
    def config(self) -> str:
        return self.cell.get("variant") or self.head

    @property
    def shared_run(self) -> bool:
        """Whether the cell took an identical finished cell's results (``same_run_as``, one run reached
        by two groups): it is that run, not another, so a count of runs or of time skips it."""
        return bool(self.cell.get("same_run_as"))


def runs_count(n: int) -> str:
    """``1 run`` / ``3 runs``: the count every report sentence puts beside a code state or setting."""
    return f"{n} run" if n == 1 else f"{n} runs"


def find_cells(runs_dir: str | Path) -> list[CellResult]:
    """Every finished cell under ``runs_dir`` (unfinished ones have no results yet)."""
    found = []
    for cell_file in sorted(Path(runs_dir).rglob(CELL_FILE)):
        results_file = cell_file.parent / RESULTS_FILE
        if results_file.is_file():
            found.append(CellResult(cell_file.parent, json.loads(cell_file.read_text()), read_results(results_file)))
    return found


def _diagnostic_rows(result: dict[str, Any]) -> dict[str, float]:
    diag = result.get("diagnostics") or {}
    out = {}
    effect = diag.get("document_norm_effect") or {}
    if isinstance(effect.get("cohens_d"), (int, float)):
        out["cohens_d_doc_norm"] = float(effect["cohens_d"])
    for side in ("query_norm", "document_norm"):
        if isinstance(diag.get(side), dict) and "cv" in diag[side]:
            out[f"{side}_cv"] = float(diag[side]["cv"])
    return out


def tidy_rows(cells: list[CellResult]) -> list[Row]:
    rows: list[Row] = []
    for c in cells:
        base = dict(
            group=c.cell["group"],
            kind=c.cell["kind"],
            model=c.cell.get("model") or "default",
            config=c.config,
            seed=int(c.cell["seed"]),
        )
        for dataset, result in c.results["metrics"].items():
            values = {m: result[m] for m in (*TEXT_METRICS, *CLIP_METRICS) if isinstance(result.get(m), (int, float))}
            values.update(_diagnostic_rows(result))
            rows += [Row(**base, dataset=dataset, metric=m, value=float(v)) for m, v in values.items()]
    return rows


# (group, model, dataset, config) -> seed -> question id -> metric -> value
QuestionOutcomes = dict[tuple[str, str, str, str], dict[int, dict[str, dict[str, float]]]]


def query_outcomes(cells: list[CellResult]) -> QuestionOutcomes:
    """The per-query scores each run kept with its test results (``per_query`` of a dataset), for
    the query-level tests of the retrieval tables."""
    outcomes: QuestionOutcomes = {}
    for c in cells:
        model = c.cell.get("model") or "default"
        for dataset, result in c.results["metrics"].items():
            per_query = result.get("per_query")
            if isinstance(per_query, dict) and per_query:
                key = (c.cell["group"], model, dataset, c.config)
                outcomes.setdefault(key, {})[int(c.cell["seed"])] = per_query
    return outcomes


def evaluation_rows(cells: list[CellResult]) -> tuple[list[Row], QuestionOutcomes]:
    """Tidy rows of every finished attached evaluation (dataset ``<evaluation>: <dataset>``) and the
    per-question outcomes behind them, for paired tests over questions."""
    rows: list[Row] = []
    outcomes: QuestionOutcomes = {}
    for c in cells:
        model = c.cell.get("model") or "default"
        for attached in c.cell.get("evaluations", []):
            folder = c.directory / EVALUATIONS_DIR / attached["name"]
            if not (folder / RESULTS_FILE).is_file():
                continue
            evaluation = get_evaluation(attached["kind"])
            result = evaluation.read(folder)
            for dataset, values in result.metrics.items():
                name = f"{attached['name']}: {dataset}"
                base = dict(group=c.cell["group"], kind=c.cell["kind"], model=model, config=c.config)
                rows += [
                    Row(**base, seed=int(c.cell["seed"]), dataset=name, metric=m, value=float(values[m]))
                    for m in evaluation.metrics
                    if m in values
                ]
                key = (c.cell["group"], model, name, c.config)
                outcomes.setdefault(key, {})[int(c.cell["seed"])] = result.outcomes.get(dataset, {})
    return rows, outcomes


def bright_suites(cells: list[CellResult]) -> dict[str, str]:
    """Dataset name -> BRIGHT setting (e.g. ``bright``, ``bright-long``, ``bright@official``) of every
    BRIGHT task result, read from the provenance block the evaluation writes with it."""
    return {
        dataset: result["data"]["suite"]
        for c in cells
        for dataset, result in c.results["metrics"].items()
        if isinstance(result.get("data"), dict) and result["data"].get("kind") == "bright"
    }


def bright_means(rows: list[Row], suites: dict[str, str]) -> list[Row]:
    """BRIGHT's own score: per run, setting and metric, the plain mean over its tasks.

    Each task weighs the same, as in the BRIGHT paper. The row names the setting and how many tasks
    it averages, so means over different task sets never share a table row.
    """
    tasks: dict[tuple, list[float]] = {}
    for r in rows:
        if r.dataset in suites:
            key = (r.group, r.kind, r.model, r.config, r.seed, suites[r.dataset], r.metric)
            tasks.setdefault(key, []).append(r.value)
    return [
        Row(group, kind, model, config, seed, f"{suite} mean ({len(values)} tasks)", metric, sum(values) / len(values))
        for (group, kind, model, config, seed, suite, metric), values in tasks.items()
    ]


def learnable_trajectories(cells: list[CellResult]) -> list[tuple[CellResult, list[tuple[int, float, float]]]]:
    """(cell, [(step, gamma_q, gamma_d), ...]) for every learnable cell, from its ``metrics.jsonl``."""
    out = []
    for c in cells:
        path = c.directory / "metrics.jsonl"
        if c.head != "learnable" or not path.is_file():
            continue
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        points = [
            (r["step"], r["gamma_q"], r["gamma_d"]) for r in records if r.get("kind") == "train" and "gamma_q" in r
        ]
        out.append((c, points))
    return out


def gamma_trajectories(cells: list[CellResult]) -> dict[str, list[tuple[int, float, float]]]:
    """The trajectories by figure label: ``group/seed`` (``group/model/seed`` when the sweep names models)."""
    return {
        "/".join(x for x in (c.cell["group"], c.cell.get("model"), f"seed{c.cell['seed']}") if x): points
        for c, points in learnable_trajectories(cells)
    }


def document_norm_samples(cells: list[CellResult]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Relevant vs non-relevant document norms per (head, dataset), when the results kept them."""
    out = {}
    for c in cells:
        for dataset, result in c.results["metrics"].items():
            effect = (result.get("diagnostics") or {}).get("document_norm_effect") or {}
            if "relevant_norms" in effect and "nonrelevant_norms" in effect:
                out.setdefault(
                    (c.config, dataset),
                    {"relevant": effect["relevant_norms"], "nonrelevant": effect["nonrelevant_norms"]},
                )
    return out


# (group, model, dataset) -> query id -> the unit it shares with other queries
QueryClusters = dict[tuple[str, str, str], dict[str, str]]


def caption_clusters(cells: list[CellResult], layouts: dict[str, list[int]] | None = None) -> QueryClusters:
    """For each CLIP test set, the image each text -> image query (``text-<row>``) searches for.

    A CLIP test set holds several captions of each image, all searching for that one image, so
    their outcomes are correlated and the image is the unit of the tests. A run records each
    caption's image (``image_of_text``); for runs from before that, ``layouts``
    (:mod:`clipmag_experiments.sweep.caption_layout`, read from the test shards) gives it, and
    failing both the test set's layout does: the evaluation flattens each image's captions in image
    order and every image of the bundled digits and of COCO-style sets has the same number of
    captions, so caption ``row`` belongs to image ``row // (n_texts / n_images)``. A set whose
    counts do not divide, with no record of its captions' images, is refused, not grouped wrongly."""
    clusters: QueryClusters = {}
    for c in cells:
        if c.cell.get("kind") != "clip":
            continue
        model = c.cell.get("model") or "default"
        for dataset, result in c.results["metrics"].items():
            images, texts = int(result.get("n_images", 0)), int(result.get("n_texts", 0))
            if not images or not isinstance(result.get("per_query"), dict):
                continue
            owners = result.get("image_of_text") or (layouts or {}).get(dataset)
            if owners is None and texts % images:
                raise ConfigError(
                    f"{c.directory / RESULTS_FILE}: {dataset} has {texts} captions of {images} images, not the same "
                    "number per image, and no record of each caption's image: write it from the test shards with "
                    "python -m clipmag_experiments.sweep.caption_layout SWEEP_FOLDER TEST_SHARDS"
                )
            if owners is None:
                owners = [row // (texts // images) for row in range(texts)]
            if len(owners) != texts or max(owners, default=0) >= images:
                raise ConfigError(
                    f"{c.directory / RESULTS_FILE}: {dataset} has {texts} captions of {images} images, but its caption "
                    f"layout names {len(owners)} captions of {max(owners, default=-1) + 1} images: another test set; "
                    "write the layout again from the shards this run was tested on"
                )
            queries = (q for q in result["per_query"] if q.startswith("text-"))
            clusters[(c.cell["group"], model, dataset)] = {
                q: f"captions of image-{owners[int(q.removeprefix('text-'))]}" for q in queries
            }
    return clusters
