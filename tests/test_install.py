"""An installed wheel works outside the repository: packaged configs, console scripts.

The wheel is built without dependencies and installed into a throwaway venv whose ``.pth`` file
points at this environment's site-packages (torch and the rest are not reinstalled); the
trainers then run from a directory that holds no ``configs/`` folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("install")
    source = root / "source"  # a copy, so the build leaves nothing in the checkout
    ignore = shutil.ignore_patterns(".venv", ".git", "runs", "build", "*.egg-info", "__pycache__")
    shutil.copytree(REPO, source, symlinks=True, ignore=ignore)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    _run([*pip_wheel, "-w", str(root / "dist"), str(source)], cwd=root)
    (wheel,) = (root / "dist").glob("clipmag-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root).stdout.strip()
    )
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], cwd=root)
    return env_dir


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_console_scripts_run_from_outside_the_repository(installed, tmp_path):
    where = _run(
        [str(installed / "bin" / "python"), "-c", "import clipmag, text_retrieval; print(clipmag.__file__)"],
        cwd=tmp_path,
        env=_clean_env(),
    ).stdout
    assert str(REPO) not in where, f"imported the checkout, not the wheel: {where}"
    for script in ("clipmag-train-text", "clipmag-train-clip"):
        out = _run([str(installed / "bin" / script), "--help"], cwd=tmp_path, env=_clean_env()).stdout
        assert "head.name" in out and "train.steps" in out
    out = _run([str(installed / "bin" / "clipmag-index"), "--help"], cwd=tmp_path, env=_clean_env()).stdout
    assert "build:" in out and "--metric" in out and "query:" in out and "--index" in out
    for script in (
        "clipmag-eval-text",
        "clipmag-sweep",
        "clipmag-report",
        "clipmag-rerun-cell",
        "clipmag-demo",
        "clipmag-predict-norm",
        "clipmag-start-diagnostics",
        "clipmag-make-text-shards",
        "clipmag-make-clip-shards",
        "clipmag-eval-clip-benchmark",
    ):
        assert (installed / "bin" / script).is_file(), script


def test_packaged_configs_resolve_and_load(installed, tmp_path):
    code = (
        "from image_text.model.architecture import resolve_model_name; print(resolve_model_name('clipmag-tiny'));"
        "from clipmag_experiments.sweep.run import load_sweep_config as load;"
        "print(len(load('configs/sweeps/demo.yaml').groups));"
        "from text_retrieval.cli import parse_args;"
        "print(parse_args(['--config', 'configs/text/sts.yaml']).objective)"
    )
    out = _run([str(installed / "bin" / "python"), "-c", code], cwd=tmp_path, env=_clean_env()).stdout.split()
    assert out == ["clipmag-tiny", "3", "sts"]
