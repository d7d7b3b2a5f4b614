"""Every result names its code: commit, dirtiness and a hash of the difference, read from git."""

from __future__ import annotations

import os
import subprocess

import pytest

from clipmag.results.provenance import config_sha256, describe_code, provenance, read_code_state, same_code
from clipmag.results.record import build_results
from clipmag.scoring.head_record import HeadRecord


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.org")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / ".gitignore").write_text("runs/\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def _head(root) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_a_clean_tree_names_its_commit_and_ignored_files_do_not_make_it_dirty(repo):
    (repo / "runs").mkdir()
    (repo / "runs" / "results.json").write_text("{}")
    state = read_code_state(repo)
    assert state == {"commit": _head(repo), "dirty": False, "diff_sha256": None, "reason": None}


def test_edits_and_untracked_files_make_it_dirty_with_a_hash_that_follows_them(repo):
    (repo / "code.py").write_text("x = 2\n")
    edited = read_code_state(repo)
    assert edited["dirty"] is True and edited["commit"] == _head(repo) and len(edited["diff_sha256"]) == 64
    (repo / "new.py").write_text("y = 1\n")
    untracked = read_code_state(repo)
    assert untracked["diff_sha256"] != edited["diff_sha256"]
    (repo / "new.py").write_text("y = 2\n")  # same names, other content: another hash
    assert read_code_state(repo)["diff_sha256"] != untracked["diff_sha256"]
    (repo / "new.py").write_text("y = 1\n")
    assert read_code_state(repo)["diff_sha256"] == untracked["diff_sha256"]  # the same tree, the same hash


def test_ignored_folders_do_not_count_but_code_beside_them_does(repo):
    """A benchmark run after another that stored its record under results/ still ran the commit's code."""
    (repo / "results").mkdir()
    (repo / "results" / "speed.json").write_text("{}")
    assert read_code_state(repo)["dirty"] is True
    assert read_code_state(repo, ignored=("results",)) == {
        "commit": _head(repo),
        "dirty": False,
        "diff_sha256": None,
        "reason": None,
    }
    (repo / "code.py").write_text("x = 2\n")
    assert read_code_state(repo, ignored=("results",))["dirty"] is True


def test_a_tracked_record_rewritten_in_an_ignored_subfolder_does_not_count(repo):
    """The deploy tables: the first measurement rewrites its committed record under results/deploy
    before the second starts in the same checkout, which still runs the commit's code."""
    (repo / "results" / "deploy").mkdir(parents=True)
    (repo / "results" / "deploy" / "compression.json").write_text("{}")
    (repo / "results" / "kept.json").write_text("{}")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "records")
    (repo / "results" / "deploy" / "compression.json").write_text('{"rows": []}')
    clean = read_code_state(repo, ignored=("results/deploy",))
    assert clean == {"commit": _head(repo), "dirty": False, "diff_sha256": None, "reason": None}
    assert provenance(code=clean)["code"] == clean  # the record names the state it is given
    (repo / "results" / "kept.json").write_text("[]")  # beside the ignored folder: counts
    assert read_code_state(repo, ignored=("results/deploy",))["dirty"] is True


def test_outside_a_checkout_the_reason_is_recorded(tmp_path):
    state = read_code_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None and state["reason"].startswith("not a git checkout")


def test_a_copy_in_an_ignored_folder_of_a_checkout_is_not_credited_to_its_commit(repo):
    installed = repo / "runs" / "venv" / "clipmag"  # as a wheel installed into a git-ignored .venv
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("")
    state = read_code_state(installed)
    assert state["commit"] is None and "is not tracked by the git checkout" in state["reason"]


def test_code_states_match_only_on_one_commit_and_one_difference():
    clean = {"commit": "a" * 40, "dirty": False, "diff_sha256": None}
    dirty = {"commit": "a" * 40, "dirty": True, "diff_sha256": "d" * 64}
    assert same_code(clean, dict(clean)) and same_code(dirty, dict(dirty)) and not same_code(clean, dirty)
    assert not same_code({"commit": None}, {"commit": None})  # two unknowns are not one known version
    assert describe_code(dirty) == f"commit {'a' * 12}, dirty tree (diff {'d' * 12})"
    assert describe_code(None) == "no commit recorded (written before results named their code)"


def test_results_carry_the_block_with_the_config_and_its_hash():
    config = {"head": {"name": "qnorm"}, "train": {"steps": 3}}
    record = build_results({}, HeadRecord({"name": "qnorm"}), {}, {}, {}, {}, config=config)
    block = record["provenance"]
    assert block["config"] == config and block["config_sha256"] == config_sha256(dict(reversed(config.items())))
    assert (
        block["command"]["argv"]
        and block["command"]["cwd"] == os.getcwd()
        and set(block["code"]) == {"commit", "dirty", "diff_sha256", "reason"}
    )
    assert provenance()["config"] is None and provenance()["config_sha256"] is None
