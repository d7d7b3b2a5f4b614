"""DPR's QA files, read from the pinned pyserini wheel, are fetched once per user: a second set
(another checkout's) copies them from ``$CLIPMAG_HOME`` without fetching the wheel again."""

from __future__ import annotations

import io
import zipfile

from text_fixtures import serve_wheel

from text_retrieval.rag.bundled import DPR_SOURCES, PYSERINI, PYSERINI_JAR, dpr_qa_cache, fetch_dpr_qa


def _fake_pyserini(path) -> None:
    """A wheel holding the anserini jar with the five topics files, as the real one lays them out."""
    jar = io.BytesIO()
    with zipfile.ZipFile(jar, "w") as zf:
        for name in DPR_SOURCES:
            zf.writestr(f"topics-and-qrels/topics.dpr.{name}.test.txt", f"a {name} question?\t['answer']\n")
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(PYSERINI_JAR, jar.getvalue())


def test_the_wheel_is_fetched_once_per_user_and_each_set_gets_its_copies(tmp_path, monkeypatch):
    wheel = tmp_path / "pyserini-0.17.0-py3-none-any.whl"
    _fake_pyserini(wheel)
    fetched = serve_wheel(monkeypatch, "text_retrieval.rag.bundled.with_wheel", wheel)
    monkeypatch.setenv("CLIPMAG_HOME", str(tmp_path / "home"))
    first = fetch_dpr_qa(tmp_path / "one" / "dpr")
    second = fetch_dpr_qa(tmp_path / "two" / "dpr")
    assert fetched == [PYSERINI] and dpr_qa_cache().parent == tmp_path / "home" / "data"
    for name in DPR_SOURCES:
        assert first[name].read_text() == second[name].read_text() == f"a {name} question?\t['answer']\n"
        assert second[name].parent == tmp_path / "two" / "dpr"
