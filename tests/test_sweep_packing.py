"""Packed cells: a sweep with ``pack: 2`` runs two tiny cells at once in their own processes, each
on its share of the threads, records that count, gives what an unpacked run at the same count
gives, resumes like any sweep, and refuses to add cells of another thread count to a group, or
cells that would compute in another precision than the ones its archive restores (a sweep resumed
on another class of CPU)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from text_fixtures import minilm_path, tiny_train_args, write_code_search_set, write_tiny_bert

from clipmag.errors import ConfigError
from clipmag_experiments.cells.numerics import mixed_numerics, numerics_key
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.design.grid import GridExtension, SweepConfig, SweepGroup, SweepVariant
from clipmag_experiments.sweep import run as sweep
from clipmag_experiments.sweep.archive import archive_results
from clipmag_experiments.sweep.packing import cell_threads, packed_stages
from clipmag_experiments.sweep.rerun_comparison import numbers


@pytest.fixture
def tiny_args(tmp_path: Path) -> list[str]:
    minilm_path()  # skips without the offline MiniLM (its tokenizer)
    write_tiny_bert(tmp_path / "tiny")
    write_code_search_set(tmp_path)
    args = tiny_train_args(tmp_path / "tiny", tmp_path, tmp_path / "unused", "data.validation=[]", "train.steps=2")
    return [a for a in args if not a.startswith("train.output_dir")]


def _results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


def test_packed_cells_run_at_once_record_their_threads_and_match_an_unpacked_run(tiny_args, tmp_path):
    threads = cell_threads(2)
    packed = SweepConfig(
        output_dir=str(tmp_path / "packed"), pack=2, groups=[SweepGroup(name="g", heads=["cosine", "qnorm"])]
    )
    packed.groups[0].args = list(tiny_args)
    sweep.run_sweep(packed)
    folders = {h: tmp_path / "packed" / "g" / "default" / h / "seed0" for h in ("cosine", "qnorm")}
    for folder in folders.values():
        record = _results(folder)
        assert record["numerics"]["torch_threads"] == threads
        assert record["provenance"]["config"]["train"]["threads"] == threads
        assert "train.threads=" in (folder / "cell.log").read_text()  # its own process, its output in its log

    alone = SweepConfig(
        output_dir=str(tmp_path / "alone"),
        groups=[SweepGroup(name="g", heads=["qnorm"], args=[*tiny_args, f"train.threads={threads}"])],
    )
    sweep.run_sweep(alone)
    assert numbers(_results(tmp_path / "alone" / "g" / "default" / "qnorm" / "seed0")["metrics"]) == numbers(
        _results(folders["qnorm"])["metrics"]
    )

    written = {h: (f / "results.json").stat().st_mtime_ns for h, f in folders.items()}
    sweep.run_sweep(packed)  # resumed: both finished, nothing runs again
    assert {h: (f / "results.json").stat().st_mtime_ns for h, f in folders.items()} == written

    packed.pack, packed.args = 1, [f"train.threads={threads + 1}"]
    packed.groups[0].heads.append("dot")  # a cell added later, run at another count than its group's
    with pytest.raises(ConfigError, match="group 'g' mixes numerics"):
        sweep.run_sweep(packed)


def test_a_group_waits_for_the_groups_before_it_and_extensions_run_one_at_a_time(tmp_path):
    grid = SweepGroup(
        name="grid",
        heads=["cosine"],
        variants=[SweepVariant("s10", ["loss.scale=10"]), SweepVariant("s20", ["loss.scale=20"])],
        seeds=[0, 1],
        extend=GridExtension(low=[SweepVariant("s5", ["loss.scale=5"])], high=[SweepVariant("s40", ["loss.scale=40"])]),
    )
    later = SweepGroup(name="later", heads=["cosine", "qnorm"])
    stages = packed_stages(expand(SweepConfig(output_dir=str(tmp_path), groups=[grid, later])))
    assert [[c.label for c in stage] for stage in stages] == [
        [f"grid/cosine-{v}/seed{s}" for v in ("s10", "s20") for s in (0, 1)],
        ["grid/cosine-s5/seed0"],
        ["grid/cosine-s5/seed1"],
        ["grid/cosine-s40/seed0"],
        ["grid/cosine-s40/seed1"],
        ["later/cosine/seed0", "later/qnorm/seed0"],
    ]


def test_pack_is_refused_for_slurm(tmp_path):
    cfg = SweepConfig(output_dir=str(tmp_path), launcher="slurm", pack=2, groups=[SweepGroup(name="g", heads=["dot"])])
    with pytest.raises(ConfigError, match="pack runs local cells at once"):
        sweep.run_sweep(cfg)
    assert not (tmp_path / "sweep.json").exists()


def test_a_sweep_resumed_where_its_precision_would_differ_is_refused_before_it_writes(tiny_args, tmp_path):
    first = SweepConfig(output_dir=str(tmp_path / "first"), groups=[SweepGroup(name="g", heads=["cosine"])])
    first.groups[0].args = list(tiny_args)
    sweep.run_sweep(first)
    archive_results(tmp_path / "first", tmp_path / "archive")
    record = tmp_path / "archive" / "g" / "default" / "cosine" / "seed0" / "results.json"
    ran = json.loads(record.read_text())
    ran["numerics"]["autocast"] = "float16"  # as if precision auto had resolved otherwise on its machine
    record.write_text(json.dumps(ran))

    later = SweepConfig(
        output_dir=str(tmp_path / "later"),
        restore_from=str(tmp_path / "archive"),
        groups=[SweepGroup(name="g", heads=["cosine", "qnorm"])],
    )
    later.groups[0].args = list(tiny_args)
    with pytest.raises(ConfigError, match=r"group 'g' mixes numerics \(") as refused:
        sweep.run_sweep(later)
    # the settings are listed in sorted order, which puts this CPU's own precision first or second
    assert re.search(r"\b\d+ threads, float16: g/cosine/seed0 ran[;)]", str(refused.value))
    assert re.search(r"\b\d+ threads, (bfloat16|fp32): g/qnorm/seed0 would run[;)]", str(refused.value))
    assert not (tmp_path / "later").exists()  # refused before the protocol record or a restored cell


def test_only_a_table_of_several_numerics_is_named():
    two = numerics_key({"torch_threads": 2, "autocast": "bfloat16", "cpu_capability": "AVX512"})
    one = numerics_key({"torch_threads": 1, "autocast": "bfloat16", "cpu_capability": "AVX512"})
    assert two == "2 threads, bfloat16" == numerics_key({"torch_threads": 2, "autocast": "bfloat16"})  # no kernels
    assert mixed_numerics([("group 'g'", "g/a", two), ("group 'g'", "g/b", two), ("group 'h'", "h/c", one)]) is None
    mixed = mixed_numerics([("group 'g'", "g/a", two), ("group 'g'", "g/b", one), ("group 'g'", "g/c", one)])
    assert mixed is not None
    assert mixed.startswith(f"group 'g' mixes numerics ({one}: g/b, g/c; {two}: g/a)")
    fp32 = numerics_key({"torch_threads": 2, "autocast": "fp32", "cpu_capability": "AVX2"})
    assert "start 'splade' mixes numerics" in mixed_numerics(
        [("start 'splade'", "a", two), ("start 'splade'", "b", fp32)]
    )
