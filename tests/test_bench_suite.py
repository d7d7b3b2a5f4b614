"""``benchmarks/bench_suite.py`` on a tiny repository whose make targets print pytest-like summaries:
it clones a clean commit, times each target, keeps one entry per CPU class, and writes nothing when a
target fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_suite.py"
MAKEFILE = "test:\n\t@echo '=== 3 passed, 1 skipped in 0.10s ==='\nbroken:\n\t@echo 'E  1 failed'; exit 2\n"


def _repository(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "Makefile"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "--quiet", "-m", "tiny"], check=True)
    return repo


def _run(repo: Path, into: Path, output: Path, target: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(SCRIPT), "--repository", str(repo), "--targets", target]
    argv += ["--into", str(into), "--output", str(output)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_a_measured_class_replaces_its_own_entry_only(tmp_path):
    repo, output = _repository(tmp_path), tmp_path / "tests.json"
    other = {"wall_seconds": {"test": 1.0}, "cpu": "Another CPU", "cpu_bf16": ["avx512_bf16"], "cores": 2}
    output.write_text(json.dumps({"runs": [other]}), encoding="utf-8")
    for attempt in range(2):
        done = _run(repo, tmp_path / f"clone{attempt}", output, "test")
        assert done.returncode == 0, done.stderr
        assert not (tmp_path / f"clone{attempt}").exists()  # removed without --keep
    runs = json.loads(output.read_text(encoding="utf-8"))["runs"]
    assert len(runs) == 2 and runs[0] == other
    ours = runs[1]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert ours["code"] == {"commit": head.strip(), "dirty": False, "diff_sha256": None, "reason": None}
    assert ours["passed"] == {"test": "3 passed, 1 skipped in 0.10s"} and ours["wall_seconds"]["test"] >= 0


def test_a_failing_target_writes_nothing_and_names_its_log(tmp_path):
    repo, output = _repository(tmp_path), tmp_path / "tests.json"
    done = _run(repo, tmp_path / "clone", output, "broken")
    assert done.returncode != 0 and not output.exists()
    assert "make broken failed" in done.stderr and "make-broken.log" in done.stderr
    assert "Traceback" not in done.stderr
