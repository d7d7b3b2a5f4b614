"""Reading RAG corpora and QA files, bad input, and the bundled set's cleaning and selection rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from text_retrieval.data.loaders.reading import DataFormatError
from text_retrieval.rag.bundled import build_rag_bundled, eligible_title, select_questions
from text_retrieval.rag.data import Passage, Question, read_corpus, read_qa
from text_retrieval.rag.wiki import Article, clean_wikitext, split_passages

# A real TriviaQA line (doubled quotes inside quoted fields): plain tab splitting mangles it.
TRIVIA_LINE = (
    '"""What was the first pop video directed by John Landis, whose directing credits include '
    '""""National Lampoon\'s Animal House"""" and """"The Blues Brothers""""?"""\t'
    '"[\'Thriller\', ""Michael Jackson\'s Thriller""]"\n'
)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_dpr_tsv_read_with_csv_like_dpr(tmp_path):
    path = _write(tmp_path / "trivia.test.txt", TRIVIA_LINE + "who wrote hamlet?\t['Shakespeare', 'W. Shakespeare']\n")
    qa = read_qa(path)
    assert qa.name == "trivia" and len(qa) == 2
    first, second = qa.questions
    # the file quotes its fields twice over; csv undoes one level, as it does for DPR
    assert first.text.startswith('"What was the first pop video') and first.text.endswith('""The Blues Brothers""?"')
    assert first.answers == ("Thriller", "Michael Jackson's Thriller")
    assert second == Question("trivia-1", "who wrote hamlet?", ("Shakespeare", "W. Shakespeare"), "string")


def test_json_lines_split_on_newline_only_and_curated_is_regex(tmp_path):
    rows = [{"question": "a\u2028b?", "answer": ["x"]}, {"question": "c?", "answer": ["y|z"]}]
    path = _write(tmp_path / "curated.test.txt", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    qa = read_qa(path)
    assert [q.text for q in qa.questions] == ["a\u2028b?", "c?"]
    assert {q.match for q in qa.questions} == {"regex"}
    assert read_qa(path, match="string").questions[0].match == "string"


def test_hotpotqa_json_array(tmp_path):
    rows = [{"_id": "5a8b", "question": "Which band?", "answer": "Queen", "supporting_facts": []}]
    qa = read_qa(_write(tmp_path / "hotpot_dev_fullwiki_v1.json", json.dumps(rows)))
    assert qa.questions == [Question("5a8b", "Which band?", ("Queen",), "string")]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("nq.test.txt", "q1\t['a']\nq2 without answers\n", r"nq.test.txt, line 2: expected 2 tab-separated fields"),
        ("nq.test.txt", "q1\t['a']\nq2\tnot a list(\n", r"nq.test.txt, line 2: expected a Python list of answers"),
        ("nq.test.txt", "q1\t[]\n", r"line 1: expected a non-empty list of answer strings"),
        ("wq.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "q2"\n', r"wq.jsonl, line 2: expected one JSON"),
        (
            "wq.jsonl",
            '{"question": "q", "answers": ["a"]}\n\n{"question": "q2"}\n',
            r"line 3: expected an 'answer' field",
        ),
    ],
)
def test_malformed_qa_names_file_and_line(tmp_path, name, text, message):
    with pytest.raises(DataFormatError, match=message):
        read_qa(_write(tmp_path / name, text))


def test_corpus_formats_and_duplicate_ids(tmp_path):
    tsv = _write(tmp_path / "psgs_w100.tsv", 'id\ttext\ttitle\n1\t"Text with a\ttab"\tAardvark\n2\tMore text\tAbacus\n')
    corpus = read_corpus(tmp_path)
    assert corpus.passages == [Passage("1", "Aardvark", "Text with a\ttab"), Passage("2", "Abacus", "More text")]
    assert corpus.passages[1].retrieval_text == "Abacus More text"
    beir = _write(tmp_path / "corpus.jsonl", '{"_id": "d1", "title": "T", "text": "x"}\n{"_id": 7, "text": "y"}\n')
    assert [(p.id, p.title) for p in read_corpus(beir).passages] == [("d1", "T"), ("7", "")]
    _write(tsv, "id\ttext\ttitle\n1\ta\tA\n2\tb\tB\n1\tc\tC\n")
    with pytest.raises(DataFormatError, match=r"psgs_w100.tsv, line 4: expected unique passage ids.*first on line 2"):
        read_corpus(tsv)
    _write(beir, '{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n')
    with pytest.raises(DataFormatError, match=r"corpus.jsonl, line 2: expected unique passage ids"):
        read_corpus(beir)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty: no passage file"):
        read_corpus(tmp_path / "empty")


def test_clean_wikitext_keeps_prose_only():
    text = (
        "{{Infobox|name=X}}'''Aardvark''' is a [[mammal|burrowing mammal]] ({{IPA|x}})<ref>Cite</ref> of "
        "[[Africa]].[[File:A.jpg|thumb|caption]]\n== History ==\n* It eats ants.<!-- hidden -->\n"
        "{| class=wikitable\n| cell\n|}\n[[Category:Mammals]]\n== References ==\nSmith 2001.\n"
    )
    assert clean_wikitext(text) == ["Aardvark is a burrowing mammal of Africa.", "It eats ants."]


def test_split_passages_100_words_like_dpr():
    words = [f"w{i}" for i in range(250)]
    passages = split_passages([Article("A", (" ".join(words[:120]), " ".join(words[120:]))), Article("B", ("b",))])
    assert [len(p.text.split()) for p in passages] == [100, 100, 50, 1]
    assert [p.id for p in passages] == ["1", "2", "3", "4"] and passages[2].text.startswith("w200")
    assert [p.title for p in passages] == ["A", "A", "A", "B"]


def test_answerable_subset_rule():
    assert eligible_title("Alien") is None and eligible_title("Ada") is None  # one short word
    assert eligible_title("Albedo") == ["albedo"] and eligible_title("Animalia (book)") == ["animalia"]
    assert eligible_title("Apollo 11") == ["apollo", "11"]
    passages = [Passage("1", "Albedo", "Fresh snow has an albedo of 0.9."), Passage("2", "Apollo 11", "landed in 1969")]
    questions = [
        Question("q0", "What is the albedo of fresh snow?", ("0.9",), source="nq"),
        Question("q1", "When did Apollo 11 land?", ("1969",), source="nq"),
        Question("q2", "What is the albedos value?", ("0.9",), source="nq"),  # title not token-bounded
        Question("q3", "Who flew Apollo 11?", ("Armstrong",), source="wq"),  # answer not in its article
        Question("q4", "When did Apollo 11 land?", (r"19\d9",), "regex", source="wq"),
    ]
    chosen, counts = select_questions(passages, questions, max_questions=10, seed=0)
    assert [(q.id, title) for q, title in chosen] == [("q0", "Albedo"), ("q1", "Apollo 11"), ("q4", "Apollo 11")]
    assert counts == {
        "nq": {"questions": 3, "candidates": 2, "kept": 2},
        "wq": {"questions": 2, "candidates": 1, "kept": 1},
    }
    capped, _ = select_questions(passages, questions, max_questions=2, seed=0)
    assert len(capped) == 2 and capped == select_questions(passages, questions, max_questions=2, seed=0)[0]


def _small_dpr_dir(shared_data: Path, folder: Path) -> Path:
    """The first 200 questions of each real DPR file, plus NQ's Alabama question (line 688)."""
    folder.mkdir()
    for name in ("nq", "trivia", "squad", "wq", "curated"):
        lines = (shared_data / "qa" / "dpr" / f"{name}.test.txt").read_text(encoding="utf-8").split("\n")
        keep = lines[:200] + (lines[687:688] if name == "nq" else [])
        (folder / f"{name}.test.txt").write_text("\n".join(keep) + "\n", encoding="utf-8")
    return folder


@pytest.mark.slow
def test_build_bundled_from_dpr_files_is_deterministic(tmp_path, shared_data):
    dpr = _small_dpr_dir(shared_data, tmp_path / "dpr")
    root = build_rag_bundled(tmp_path / "emb", dpr, max_questions=5, max_articles=5)
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["num_articles"] == 5 and manifest["counts"]["nq"]["questions"] == 201
    qa = read_qa(root / "answerable.jsonl")
    assert "where is the capital city of alabama located" in [q.text for q in qa.questions]
    assert len(qa) == sum(c["kept"] for c in manifest["counts"].values()) <= 5
    titles = {p.title for p in read_corpus(root).passages}
    assert {json.loads(line)["article"] for line in (root / "answerable.jsonl").read_text().splitlines()} <= titles
    before = (root / "passages.tsv").read_bytes(), (root / "answerable.jsonl").read_bytes()
    assert build_rag_bundled(root, dpr, max_questions=5, max_articles=5) == root  # reused, not rebuilt
    assert ((root / "passages.tsv").read_bytes(), (root / "answerable.jsonl").read_bytes()) == before
