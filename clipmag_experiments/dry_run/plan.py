"""What a dry run of the paper's configs runs, and which paper config each part of it covers.

The paper sweeps are read unchanged and changed only through a sweep's own overrides:
``launcher=torchrun nproc_per_node=2`` (gloo on CPU), sweep-level ``args`` for two steps of a small
batch (validation and a checkpoint at each), group ``args`` or ``models`` naming a tiny model in
place of each hub model (``models`` keep their labels, so run folders keep their names), the first
seed, and a subset of each group's heads or variants (:data:`SUBSET`; ``full``: all of them). The
three paper RAG configs are attached to the contriever cells as evaluations (reader ``none``, one
row per export) so the report has their table. :mod:`clipmag_experiments.dry_run.paper` runs the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clipmag.config.build import load_yaml
from clipmag.errors import ConfigError
from clipmag.registry.config_packages import packaged_configs
from clipmag_experiments.dry_run.data import standin_model
from clipmag_experiments.sweep.run import (
    SweepConfig,
    SweepEvaluation,
    SweepGroup,
    load_sweep_config,
    split_model_entry,
)

__all__ = ["PARTS", "SWEEPS", "RAG_CONFIGS", "EVAL_RUNS", "SUBSET", "PlannedSweep", "plan", "coverage"]

PARTS = ("text", "sts", "clip", "rag")
SWEEPS = {
    "text": "configs/sweeps/paper_text.yaml",
    "sts": "configs/sweeps/paper_sts.yaml",
    "clip": "configs/sweeps/paper_clip.yaml",
}
RAG_CONFIGS = ("configs/rag/paper_trivia.yaml", "configs/rag/paper_nq.yaml", "configs/rag/paper_hotpotqa.yaml")
RAG_GROUP = "contriever"  # the group whose exports the RAG configs name
# settings files no trainer's data.test names, each run with the model its header names (+ flags)
EVAL_RUNS = {
    "configs/eval/bright_official_long.yaml": ("facebook/contriever", []),
    "configs/eval/bright_e5_instruct.yaml": ("intfloat/e5-mistral-7b-instruct", ["--batch-size", "4"]),
}
# the heads (or variants) trained per group without ``full``: all five heads over the text groups,
# the cosine and qnorm exports the RAG configs read, both sides of the STS and CLIP checks
SUBSET = {
    "contriever": ["cosine", "qnorm"],
    "retromae": ["dnorm", "learnable"],
    "e5": ["dot"],
    "sts-contriever": ["cosine", "qnorm"],
    "coco": ["sym-cosine", "i2t-imgnorm"],
}
STEPS = ["train.steps=2", "train.eval_every=1", "train.save_every=1", "train.log_every=1", "data.batch_size=8"]
SHORT_ARGS = {"text": STEPS, "clip": [*STEPS, "data.eval_batch_size=64"]}
CONFIG_PATTERNS = ("sweeps/paper_*.yaml", "text/paper_*.yaml", "rag/paper_*.yaml", "eval/*.yaml", "clip/coco.yaml")


@dataclass
class PlannedSweep:
    """A paper sweep as the dry run runs it: its file, the overridden config, the groups to run."""

    path: str
    cfg: SweepConfig
    only: list[str]

    @property
    def groups(self) -> list[SweepGroup]:
        return [g for g in self.cfg.groups if not self.only or g.name in self.only]


def _names(group: SweepGroup) -> list[str]:
    return group.heads or [v.name for v in group.variants]


def _subset(group: SweepGroup, full: bool) -> SweepGroup:
    """The group with its first seed and (without ``full``) its dry-run heads or variants."""
    names = _names(group)
    chosen = names if full else SUBSET.get(group.name, names[:1])
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigError(f"sweep group {group.name!r} has no {', '.join(unknown)} (it has {', '.join(names)})")
    if group.heads:
        return dataclasses.replace(group, heads=chosen, seeds=group.seeds[:1])
    return dataclasses.replace(group, variants=[v for v in group.variants if v.name in chosen], seeds=group.seeds[:1])


def _with_standin(group: SweepGroup) -> SweepGroup:
    """The group's hub model replaced by its stand-in: in ``models`` under the same label, else (the
    model its config names) in the group's ``args``."""
    if group.models:
        entries = [split_model_entry(entry) for entry in group.models]
        return dataclasses.replace(group, models=[f"{label}={standin_model(path)}" for label, path in entries])
    name = load_yaml(group.config)["model"]["name"]  # both trainers' model key
    return dataclasses.replace(group, args=[*group.args, f"model.name={standin_model(name)}"])


def _rag_evaluations() -> list[SweepEvaluation]:
    args = ["--reader", "none", "retrieval.bm25=false", "--quiet"]  # one row: the cell's export
    return [SweepEvaluation("rag", f"rag-{Path(c).stem.removeprefix('paper_')}", c, args) for c in RAG_CONFIGS]


def dry_run_sweep(part: str, full: bool, parts: Sequence[str]) -> PlannedSweep:
    """The paper sweep of ``part`` with the dry run's overrides (``rag`` alone: the contriever group)."""
    path = SWEEPS["text" if part == "rag" else part]
    kinds = {g.kind for g in load_sweep_config(path).groups}
    if len(kinds) != 1:
        raise ConfigError(f"{path}: a dry run gives sweep-level arguments to one kind of group, found {sorted(kinds)}")
    cfg = load_sweep_config(path, [("launcher", "torchrun"), ("nproc_per_node", 2), ("args", SHORT_ARGS[kinds.pop()])])
    groups = []
    for group in cfg.groups:
        group = _with_standin(_subset(group, full))
        if group.name == RAG_GROUP and "rag" in parts:
            group = dataclasses.replace(group, evaluations=[*group.evaluations, *_rag_evaluations()])
        groups.append(group)
    return PlannedSweep(path, dataclasses.replace(cfg, groups=groups), [RAG_GROUP] if part == "rag" else [])


def plan(parts: Sequence[str], full: bool = False) -> list[PlannedSweep]:
    """The sweeps of ``parts`` in running order; builds the stand-in models they name."""
    names = [p for p in ("text", "sts", "clip") if p in parts]
    if "rag" in parts and "text" not in parts:
        names.insert(0, "rag")
    return [dry_run_sweep(name, full, parts) for name in names]


def eval_output(config: str) -> str:
    """Where the dry run evaluates with a settings file of :data:`EVAL_RUNS`."""
    return f"runs/eval/{Path(config).stem}"


def coverage(sweeps: Sequence[PlannedSweep], parts: Sequence[str]) -> dict[str, str]:
    """What runs each paper config: a sweep, a group, a trainer's ``data.test``, an evaluation."""
    found: dict[str, str] = {}
    for sweep in sweeps:
        found[sweep.path] = "swept: " + "; ".join(
            f"{g.name} ({', '.join(_names(g))}; seed {g.seeds[0]})" for g in sweep.groups
        )
        for group in sweep.groups:
            found.setdefault(str(group.config), f"config of group {group.name} in {sweep.path}")
            for entry in load_yaml(group.config).get("data", {}).get("test", []):
                if str(entry).endswith((".yaml", ".yml")):
                    found.setdefault(entry, f"data.test of {group.config}")
            for evaluation in group.evaluations:
                found[str(evaluation.config)] = f"attached to the {group.name} cells (reader none)"
    if "rag" in parts:
        for config in RAG_CONFIGS:
            settings = load_yaml(config)
            reader, output = settings["reader"]["name_or_path"], settings["output"]
            ran = f"run as configured, a stand-in for {reader} reading, into {output}"
            found[config] = "; ".join(x for x in (found.get(config), ran) if x)
    if "text" in parts:
        for config, (model, _) in EVAL_RUNS.items():
            found[config] = f"scripts/eval_text.py with a stand-in for {model}, into {eval_output(config)}"
    return found


def paper_configs() -> list[str]:
    """Every packaged paper config, named as the sweeps name them (``configs/<folder>/<file>``)."""
    found = []
    for package in ("clipmag_experiments", "text_retrieval", "image_text"):
        root = packaged_configs(package)
        found += [f"configs/{p.relative_to(root)}" for pattern in CONFIG_PATTERNS for p in root.glob(pattern)]
    return sorted(found)


def coverage_table(found: dict[str, str], parts: Sequence[str]) -> str:
    """``coverage.md``: every paper config with what ran it, or that these parts left it out."""
    lines = [f"# Paper configs in this dry run (parts: {', '.join(parts)})", "", "| config | covered by |", "|---|---|"]
    lines += [f"| `{c}` | {found.get(c, '**not covered** by these parts')} |" for c in paper_configs()]
    return "\n".join(lines) + "\n"
