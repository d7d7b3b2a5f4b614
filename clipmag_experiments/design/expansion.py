"""A sweep's cells: the checks that refuse a grid the sweep could not run (evaluations, group
order, folder names) and the expansion of each group, model by model, then head, variant and seed,
into :class:`~clipmag_experiments.design.grid.Cell` s with their folders and argument lists."""

from __future__ import annotations

from pathlib import Path

from clipmag.registry.evaluations import EVALUATIONS, get_evaluation
from clipmag.registry.front_ends import FRONT_ENDS
from clipmag.storage.naming import check_distinct_folders, check_folder_name, slug
from clipmag_experiments.design.comparison import check_comparison
from clipmag_experiments.design.grid import UNLABELLED, Cell, SweepConfig, SweepGroup, SweepVariant

__all__ = ["expand", "split_model_entry"]


def _check_evaluations(group: SweepGroup) -> None:
    names = [e.folder_name for e in group.evaluations]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep group {group.name!r}: evaluation names repeat ({names}); give each a distinct name")
    for e in group.evaluations:
        if e.kind not in EVALUATIONS:
            raise ValueError(
                f"sweep group {group.name!r}: unknown evaluation kind {e.kind!r}; valid: {', '.join(EVALUATIONS)}"
            )
        if group.kind not in get_evaluation(e.kind).front_ends:
            raise ValueError(
                f"sweep group {group.name!r}: a {e.kind!r} evaluation needs a "
                f"{' or '.join(get_evaluation(e.kind).front_ends)} group, not {group.kind!r}"
            )


def _check_earlier(group: SweepGroup, names: list[str], key: str, named: str | None) -> None:
    earlier = names[: names.index(group.name)]
    if named is not None and named not in earlier:
        raise ValueError(
            f"sweep group {group.name!r}: {key} {named!r} is not a group listed before it "
            f"({', '.join(earlier) or 'none'})"
        )


def _check_order(group: SweepGroup, cfg: SweepConfig) -> None:
    """A choice and a continuation read earlier groups; a continuation also needs its cells run in order."""
    names = [g.name for g in cfg.groups]
    _check_earlier(group, names, "choose_variant.group", group.choose_variant and group.choose_variant.group)
    _check_earlier(group, names, "continue_from", group.continue_from)
    choice = group.choose_variant
    grid = next((g for g in cfg.groups if choice and g.name == choice.group), None)
    if choice and grid and grid.extend and (choice.metric, choice.dataset) != (grid.extend.metric, grid.extend.dataset):
        raise ValueError(
            f"sweep group {group.name!r}: choose_variant reads {choice.metric} on "
            f"{choice.dataset or 'the only test set'}, but group {grid.name!r} extends its grid by "
            f"{grid.extend.metric} on "
            f"{grid.extend.dataset or 'the only test set'}; choose by what the extension reads"
        )
    if group.extend and cfg.launcher == "slurm":
        raise ValueError(
            f"sweep group {group.name!r}: extend runs a variant only after the grid's choice; "
            "run this sweep with launcher inprocess or torchrun"
        )
    if group.continue_from and cfg.launcher == "slurm":
        raise ValueError(
            f"sweep group {group.name!r}: continue_from needs each cell to start after the one it continues; "
            "run this sweep with launcher inprocess or torchrun"
        )


def split_model_entry(entry: str) -> tuple[str, str]:
    """``label=path`` -> (label, path); a plain path or hub name is its own label."""
    label, sep, path = entry.partition("=")
    if sep and label and path:
        return label, path
    return entry, entry


def _extension_variants(group: SweepGroup) -> list[tuple[SweepVariant, tuple[str, int]]]:
    """The group's extension variants after its grid, each with its edge and step outward."""
    if group.extend is None:
        return []
    if not group.variants:
        raise ValueError(f"sweep group {group.name!r}: extend needs variants, the grid it extends")
    names = [v.name for v in group.variants + group.extend.low + group.extend.high]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep group {group.name!r}: variant names repeat across the grid and its extension")
    return [(v, (edge, i)) for edge in ("low", "high") for i, v in enumerate(getattr(group.extend, edge), 1)]


def _check_folder_names(group: SweepGroup) -> None:
    """Every name of ``group`` that becomes a folder of its cells is one plain folder name (a group
    ``../x`` or a variant ``a/b`` would write outside the sweep's folder, or nest one)."""
    check_folder_name(group.name, "sweep group")
    where = f"sweep group {group.name!r}:"
    extension = [*group.extend.low, *group.extend.high] if group.extend else []
    for variant in [*group.variants, *extension]:
        check_folder_name(variant.name, f"{where} variant")
    for head in group.heads:
        check_folder_name(head, f"{where} head")
    for evaluation in group.evaluations:
        check_folder_name(evaluation.folder_name, f"{where} evaluation")


def _check_group(group: SweepGroup, cfg: SweepConfig) -> None:
    """Refuse a group the sweep could not run: an unknown front end or evaluation, a folder name that
    leaves the sweep, a choice or continuation of a later group, model_args for an absent model."""
    if group.kind not in FRONT_ENDS:
        raise ValueError(f"sweep group {group.name!r}: unknown kind {group.kind!r}; valid: {', '.join(FRONT_ENDS)}")
    _check_folder_names(group)
    _check_evaluations(group)
    _check_order(group, cfg)
    labels = {split_model_entry(m)[0] for m in group.models}
    unknown = sorted(set(group.model_args) - labels)
    if unknown:
        raise ValueError(
            f"sweep group {group.name!r}: model_args for {', '.join(unknown)}, which is not a model label "
            f"of the group ({', '.join(sorted(labels)) or 'none'})"
        )


def _group_cells(group: SweepGroup, cfg: SweepConfig) -> list[Cell]:
    """The group's cells, model by model, then head, variant (the grid's, then its extension's) and seed."""
    variants = [(v, None) for v in group.variants or [SweepVariant(name="")]]
    variants += _extension_variants(group)
    cells = []
    for entry in group.models or [None]:
        label, model = split_model_entry(entry) if entry else (None, None)
        model_folder = slug(Path(label.rstrip("/")).name or label) if label else UNLABELLED
        for head in group.heads or [None]:
            for variant, extends in variants:
                name = "-".join(x for x in (head, variant.name) if x) or "default"
                for seed in group.seeds:
                    directory = Path(cfg.output_dir) / group.name / model_folder / name / f"seed{seed}"
                    argv = ["--config", group.config] if group.config else []
                    argv += [*group.args, *group.model_args.get(label or "", [])]
                    variant_at = len(argv)
                    argv += [*variant.args, *cfg.args]
                    argv += ["--norm", head] if head else []
                    argv += ["--model", model] if model else []
                    argv += ["--seed", str(seed), "--output", str(directory), "--resume", "latest"]
                    cells.append(
                        Cell(
                            group.name,
                            group.kind,
                            label,
                            head,
                            variant.name or None,
                            seed,
                            directory,
                            argv,
                            list(group.evaluations),
                            list(variant.args),
                            variant_at,
                            group.choose_variant,
                            continue_from=group.continue_from,
                            extends=extends,
                        )
                    )
    return cells


def expand(cfg: SweepConfig) -> list[Cell]:
    """Every cell of every group, in a stable order; no two in one folder, none outside ``output_dir``."""
    check_comparison(cfg.comparison, cfg.groups)
    cells: list[Cell] = []
    for group in cfg.groups:
        _check_group(group, cfg)
        cells += _group_cells(group, cfg)
    check_distinct_folders([(f"sweep cell {cell.label}", cell.directory) for cell in cells])
    return cells
