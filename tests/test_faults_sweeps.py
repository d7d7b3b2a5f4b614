"""A sweep checks every cell with its front end's own config before the first one trains."""

from __future__ import annotations

import pytest

from clipmag.config.checks import ConfigError
from clipmag.experiments.cli import sweep_main
from clipmag.experiments.sweep import run as sweep


def _sweep_file(tmp_path, heads: str, evaluations: str = "") -> str:
    path = tmp_path / "heads.yaml"
    path.write_text(
        f"output_dir: {tmp_path / 'runs'}\n"
        "groups:\n"
        "  - name: code\n"
        "    kind: text\n"
        f"    heads: [{heads}]\n"
        "    args: [train.steps=1]\n" + evaluations
    )
    return str(path)


def test_a_typo_in_the_last_head_stops_the_sweep_before_any_cell_runs(tmp_path):
    path = _sweep_file(tmp_path, "cosine, dot, cosin")
    with pytest.raises(ConfigError) as err:
        sweep_main(["--config", path])
    assert str(err.value).startswith(f"{path}: group 'code', cell code/cosin/seed0: key 'head.name' expects")
    assert "command line" not in str(err.value)
    assert not (tmp_path / "runs" / "code").exists()  # no cell started, none wrote its description


def test_an_evaluation_argument_out_of_range_is_found_before_training(tmp_path):
    evaluations = "    evaluations:\n      - kind: rag\n        args: [--data, bundled, --top-k, '0']\n"
    path = _sweep_file(tmp_path, "cosine", evaluations)
    with pytest.raises(ConfigError, match=r"cell code/cosine/seed0: key 'reader.top_k' expects int >= 1, got 0"):
        sweep_main(["--config", path])


def test_only_must_name_groups_of_the_sweep(tmp_path):
    cfg = sweep.load_sweep_config(_sweep_file(tmp_path, "cosine"))
    with pytest.raises(ConfigError, match=r"--only names txt, which is not a group \(groups: code\)"):
        sweep.run_sweep(cfg, ["txt"], source="heads.yaml")


def test_a_sweep_without_groups_asks_for_its_file():
    with pytest.raises(ConfigError, match="the sweep has no groups; give its YAML with --config"):
        sweep_main([])
