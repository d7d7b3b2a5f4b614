"""Test-wide settings: no hub access, quiet progress bars, the location of the shared data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def _share_the_cores() -> None:
    """Under pytest-xdist, give each worker's torch its share of the cores: two workers on two cores
    each running two threads would spin against each other in every matrix product."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


_share_the_cores()


def shared_data_dir() -> Path:
    return Path(os.environ.get("CLIPMAG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared benchmark data not found at {path} (set CLIPMAG_SHARED_DATA)")
    return path


def script_env() -> dict[str, str]:
    """Environment of every script a test starts: offline, one thread per process (as torchrun
    sets it), so runs that are compared with each other do the same arithmetic in the same order."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
    }


def _launcher(nproc: int) -> list[str]:
    """The interpreter, or torchrun with ``nproc`` processes (gloo on CPU) when ``nproc`` > 1."""
    if nproc > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    return [sys.executable]


def run_python(
    script: str | Path, args: list[str], nproc: int = 1, check: bool = True, timeout: int = 400
) -> subprocess.CompletedProcess:
    """Run a script as one process, or under torchrun with ``nproc`` gloo processes, offline."""
    proc = subprocess.run(
        [*_launcher(nproc), str(script), *args],
        cwd=REPO,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} exited with {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc


def start_script(script: str | Path, args: list[str], nproc: int = 1) -> subprocess.Popen:
    """Start a script as :func:`run_python` runs it, without waiting, in a process group of its own
    (as a shell starts a foreground job), so a test can signal every process of it at once
    (``os.killpg``) while it trains; stdout and stderr are piped."""
    return subprocess.Popen(
        [*_launcher(nproc), str(script), *args],
        cwd=REPO,
        env=script_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.fixture()
def tiny_rag_files(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny RAG set (``rag_fixtures``): passages as a DPR tsv, questions as a DPR QA file."""
    from rag_fixtures import PASSAGES, QUESTIONS

    corpus = tmp_path / "psgs.tsv"
    corpus.write_text("id\ttext\ttitle\n" + "".join(f"{i}\t{t}\t{title}\n" for i, title, t in PASSAGES))
    qa = tmp_path / "tiny.test.txt"
    qa.write_text("".join(f"{q}\t{a!r}\n" for q, a in QUESTIONS))
    return corpus, qa


@pytest.fixture
def index_folder(tmp_path):
    """A folder for a served index: on tmpfs where there is one (Qdrant's local mode syncs each point)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path / "index"
        return
    folder = Path(tempfile.mkdtemp(prefix="clipmag-serving-", dir=shm))
    yield folder / "index"
    shutil.rmtree(folder, ignore_errors=True)
