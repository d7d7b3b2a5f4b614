"""BRIGHT data: the download helper on a hub-like tree, the three settings, strictness, settings files."""

from __future__ import annotations

import json
import logging

import pytest
from bright_fixtures import PAGES, REVISION, download_all_settings, write_hub_tree
from text_fixtures import REPO

from text_retrieval.data import download, fetch
from text_retrieval.data.loaders import DataFormatError, EvalSettings, detect_kind, load_bright, load_eval_datasets
from text_retrieval.data.loaders.bright import BRIGHT_REVISION, LONG_DOCUMENT_TASKS, SOURCE_FILE
from text_retrieval.data.loaders.eval_settings import read_settings_file


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return write_hub_tree(tmp_path_factory.mktemp("hub"))


@pytest.fixture(scope="module")
def root(hub, tmp_path_factory):
    return download_all_settings(hub, tmp_path_factory.mktemp("bright"))


def test_download_writes_each_setting_apart_with_its_revision(root):
    assert sorted(p.name for p in root.iterdir()) == ["biology", "leetcode", "pony"]
    assert sorted(p.name for p in (root / "biology").iterdir()) == [
        SOURCE_FILE,
        "documents.jsonl",
        "examples.jsonl",
        "gpt4_reason.jsonl",
        "long_documents.jsonl",
    ]
    assert not (root / "leetcode" / "long_documents.jsonl").exists()
    manifest = json.loads((root / "biology" / SOURCE_FILE).read_text())
    assert manifest["revision"] == REVISION and manifest["repo"] == "xlangai/BRIGHT"
    assert {f: m["rows"] for f, m in manifest["files"].items()} == {
        "examples.jsonl": 3,
        "documents.jsonl": 6,
        "long_documents.jsonl": 4,
        "gpt4_reason.jsonl": 3,
    }
    first = json.loads((root / "biology" / "gpt4_reason.jsonl").read_text().splitlines()[0])
    assert first["query"].startswith("Reasoning:") and first["gold_ids_long"] == ["bio-photo"]


def test_download_refuses_bad_requests(hub, root, tmp_path):
    with pytest.raises(ValueError, match=r"no long documents for \['leetcode'\]; the long setting covers biology"):
        fetch.download_bright(tmp_path, tasks=("leetcode",), long_documents=True, snapshot=hub)
    with pytest.raises(ValueError, match=r"unknown BRIGHT reasoning config\(s\) \['gpt5_reason'\]"):
        fetch.download_bright(tmp_path, tasks=("pony",), reasoning=["gpt5_reason"], snapshot=hub)
    with pytest.raises(ValueError, match=f"holds BRIGHT revision '{REVISION}', not '{BRIGHT_REVISION}'"):
        fetch.download_bright(root, tasks=("pony",), snapshot=hub)
    with pytest.raises(FileNotFoundError, match=r"no examples/aops-\*\.parquet, documents/aops-\*\.parquet"):
        fetch.download_bright(tmp_path, tasks=("pony", "aops"), revision=REVISION, snapshot=hub)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_download_asks_the_hub_for_the_pinned_revision_and_exact_files(hub, tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    def fake_snapshot_download(repo_id, **kwargs):
        calls.append((repo_id, kwargs))
        return str(hub)

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(fetch, "check_online", lambda url: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    fetch.download_bright(tmp_path, tasks=("biology", "pony"), long_documents=True, reasoning=["gpt4_reason"])
    ((repo, kwargs),) = calls
    assert (repo, kwargs["repo_type"], kwargs["revision"]) == ("xlangai/BRIGHT", "dataset", BRIGHT_REVISION)
    assert sorted(kwargs["allow_patterns"]) == sorted(
        f"{config}/{task}-*.parquet"
        for config in ("examples", "long_documents", "gpt4_reason")
        for task in ("biology", "pony")
    )
    assert json.loads((tmp_path / "pony" / SOURCE_FILE).read_text())["revision"] == BRIGHT_REVISION
    calls.clear()
    with pytest.raises(FileNotFoundError, match="no examples/earth_science"):  # the small tree lacks 6 of them
        fetch.download_bright(tmp_path / "long", long_documents=True)  # the default long setting: exactly 8 tasks
    assert {p.split("/")[1].split("-")[0] for p in calls[0][1]["allow_patterns"]} == set(LONG_DOCUMENT_TASKS)
    assert len(LONG_DOCUMENT_TASKS) == 8 and "leetcode" not in LONG_DOCUMENT_TASKS


def test_download_command_line(hub, tmp_path):
    download.main(
        ["bright", str(tmp_path), "--tasks", "pony", "--long-documents", "--revision", REVISION, "--snapshot", str(hub)]
    )
    assert (tmp_path / "pony" / "long_documents.jsonl").is_file() and not (
        tmp_path / "pony" / "documents.jsonl"
    ).exists()


def test_three_settings_load_their_own_queries_judgments_and_revision(root):
    standard = load_bright(root / "biology")
    long = load_bright(root / "biology", long_documents=True)
    reasoning = load_bright(root / "biology", reasoning="gpt4_reason")
    assert standard.qrels["0"] == {"bio-photo-0": 1, "bio-photo-1": 1} and len(standard.corpus_ids) == 6
    assert long.qrels["0"] == {"bio-photo": 1} and long.corpus_ids == list(PAGES["biology"])  # gold_ids_long
    assert reasoning.queries["0"].startswith("Reasoning:") and reasoning.qrels == standard.qrels
    assert [d.name for d in (standard, long, reasoning)] == [
        "bright-biology",
        "bright-biology-long",
        "bright-biology-gpt4_reason",
    ]
    assert long.describe() == {
        "kind": "bright",
        "suite": "bright-long",
        "task": "biology",
        "long_documents": True,
        "reasoning": None,
        "revision": REVISION,
        "missing_gold_ids": 0,
        "strict": False,
    }
    leetcode = load_bright(root / "leetcode")
    assert leetcode.excluded == {"0": {"binary-search-0"}, "1": {"two-sum-0"}} and not leetcode.ignore_identical_ids
    with pytest.raises(FileNotFoundError, match="no long_documents.jsonl .BRIGHT has long documents for biology"):
        load_bright(root / "leetcode", long_documents=True)


def test_collection_long_setting_takes_the_tasks_with_long_documents(root, caplog):
    with caplog.at_level(logging.INFO, logger="clipmag"):
        names = [d.name for d in load_eval_datasets(root, settings=EvalSettings(long_documents=True))]
    assert names == ["bright-biology-long", "bright-pony-long"] and "leetcode have no long documents" in caplog.text
    assert detect_kind(root) == "bright-collection" and detect_kind(root / "pony") == "bright"


def test_missing_gold_ids_are_kept_counted_and_strict_refuses(root, tmp_path, caplog):
    task = tmp_path / "biology"
    task.mkdir()
    (task / "documents.jsonl").write_text((root / "biology" / "documents.jsonl").read_text())
    rows = [json.loads(line) for line in (root / "biology" / "examples.jsonl").read_text().splitlines()]
    rows[1]["gold_ids"] += ["bio-ghost"]
    rows[2]["gold_ids"] = []  # no gold at all: pytrec_eval would skip it, and so do we
    (task / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        ds = load_bright(task)
    assert ds.qrels["1"] == {"bio-mito-0": 1, "bio-ghost": 1} and "2" not in ds.queries
    assert ds.missing_gold == 1 and "1 gold id(s) missing from documents.jsonl kept in the judgments" in caplog.text
    with pytest.raises(
        DataFormatError, match=r"examples\.jsonl, line 2: expected gold ids present in documents\.jsonl"
    ):
        load_bright(task, strict=True)


def test_settings_file_errors_name_file_and_key(root, tmp_path, monkeypatch):
    monkeypatch.chdir(root.parent)
    good = tmp_path / "official.yaml"
    good.write_text(f"bright: {root.name}\nquery_prefix:\n  default: 'Represent this {{task}} post: '\n")
    path, settings = read_settings_file(good)
    assert (
        path.name == root.name
        and settings.name == "official"
        and settings.prefix("query", "pony") == ("Represent this pony post: ")
    )
    datasets = load_eval_datasets(good)
    assert [d.name for d in datasets] == ["bright-biology@official", "bright-leetcode@official", "bright-pony@official"]
    assert datasets[0].settings == settings and datasets[0].suite == "bright@official"
    cases = {
        "bright: x\nlong_document: true\n": r"unknown key 'long_document'; valid keys: bright, name, long_documents",
        f"bright: {root.name}\nstrict: 'yes'\n": r"'strict' expected true, false or null, found 'yes'",
        f"bright: {root.name}\nmax_length_cap: true\n": r"'max_length_cap' expected a number of tokens, found True",
        f"bright: {root.name}\nquery_prefix: 'for {{topic}}: '\n": r"expected a prefix template whose only placeholder",
        f"bright: {root.name}\nreasoning: gpt5_reason\n": r"unknown BRIGHT reasoning config 'gpt5_reason'",
        "bright: nowhere\n": r"'bright' root nowhere not found",
        "long_documents: true\n": r"expected a mapping with a 'bright' key",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises((ValueError, FileNotFoundError), match=rf"bad\.yaml: .*{message}"):
            read_settings_file(bad)


def test_shipped_settings_files_load(root, tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "bright").symlink_to(root)
    monkeypatch.chdir(tmp_path)
    shipped = {p.stem: read_settings_file(p)[1] for p in (REPO / "configs" / "eval").glob("*.yaml")}
    assert set(shipped) == {"bright_official", "bright_official_long", "bright_e5_instruct"}
    assert shipped["bright_official_long"].long_documents and not shipped["bright_official"].long_documents
    assert shipped["bright_e5_instruct"].prefix("query", "theoremqa_theorems") == (
        "Instruct: Given a Math problem, retrieve relevant theorems that help answer the problem\nQuery: "
    )
    assert (
        shipped["bright_e5_instruct"]
        .prefix("query", "earth_science")
        .startswith("Instruct: Given a earth_science post")
    )
