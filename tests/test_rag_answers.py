"""Answer matching on hand-made cases: DPR's has-answer rule and SQuAD EM/F1 against hand-computed values."""

from __future__ import annotations

import json

import pytest

from clipmag.results.significance import mcnemar_p
from text_retrieval.rag.answers import exact_match, f1_score, has_answer, normalize_answer, score_prediction, tokens
from text_retrieval.rag.reader import first_line


def test_tokens_are_word_runs_or_single_symbols_uncased_nfd():
    assert tokens("U.S. Army, 1990!") == ["u", ".", "s", ".", "army", ",", "1990", "!"]
    # NFD splits "é" into "e" + a combining accent, which stays inside the word run
    assert tokens("Café") == ["cafe\u0301"]


@pytest.mark.parametrize(
    ("answers", "text", "expected"),
    [
        (["1"], "It was founded in 1990.", False),  # never inside a number
        (["1990"], "It was founded in 1990.", True),
        (["1"], "Chapter 1 begins", True),
        (["paris"], "The capital is PARIS.", True),  # uncased
        (["New York"], "new-york city", False),  # "-" is a token between the words
        (["New York"], "in New\nYork", True),  # white space of any kind separates tokens
        (["Zoë"], "Zoe\u0308 Saldana", True),  # composed vs decomposed forms agree after NFD
        (["U.S."], "the u.s. army", True),
        (["the"], "theory", False),
        (["", "   "], "anything", False),  # an answer without tokens never matches
        (["no", "Rome"], "All roads lead to Rome", True),  # any alias
    ],
)
def test_has_answer_string(answers, text, expected):
    assert has_answer(answers, text) is expected


def test_has_answer_regex_as_curated_trec():
    pattern = [r"20\s?,?\s?(32|40)0\s?-?\s?f(ee|oo)t|6,194-meter"]
    assert has_answer(pattern, "Mount McKinley is 20,320 FEET tall", "regex")
    assert has_answer(pattern, "a 6,194-meter peak", "regex")
    assert not has_answer(pattern, "about 6000 meters", "regex")
    assert not has_answer(["(unclosed"], "(unclosed", "regex")  # a broken pattern is no match, not a crash
    with pytest.raises(ValueError, match="unknown answer match"):
        has_answer(["x"], "x", "fuzzy")


def test_squad_normalisation():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theatre") == "theatre"  # articles only as whole words


def test_exact_match_and_f1_hand_computed():
    assert exact_match("the Denver Broncos.", ["Denver Broncos"]) == 1.0
    assert exact_match("Broncos", ["Denver Broncos"]) == 0.0
    # pred {denver, broncos, team}, gold {denver, broncos}: P = 2/3, R = 1, F1 = 0.8
    assert f1_score("Denver Broncos team", ["Denver Broncos"]) == pytest.approx(0.8)
    # maximum over aliases: "broncos" vs "broncos" = 1
    assert f1_score("Broncos", ["Denver Broncos", "Broncos"]) == 1.0
    # repeated tokens count with multiplicity: pred a a b, gold a b b -> common 2, P = R = 2/3
    assert f1_score("x x y", ["x y y"]) == pytest.approx(2 / 3)
    assert f1_score("", ["Paris"]) == 0.0 and f1_score("the", ["a"]) == 1.0  # both empty after normalising
    assert f1_score("nothing shared", ["Paris"]) == 0.0


def test_regex_answers_score_whole_prediction():
    assert score_prediction("20,320 feet", [r"20,?3[24]0 f(ee|oo)t"], "regex") == {
        "EM": 1.0,
        "F1": 1.0,
        "contains": 1.0,
    }
    scores = score_prediction("It is 20,320 feet high", [r"20,?3[24]0 f(ee|oo)t"], "regex")
    assert scores == {"EM": 0.0, "F1": 0.0, "contains": 1.0}


def test_contains_uses_has_answer_and_first_line_cuts_sentences():
    assert score_prediction("The capital is Paris.", ["Paris"]) == {
        "EM": 0.0,
        "F1": pytest.approx(0.5),
        "contains": 1.0,
    }
    assert first_line("\n  Paris\nQuestion: next one") == "Paris"
    assert first_line("   ") == ""


def test_mcnemar_exact_p():
    # 6 questions only the first row gets right, 0 the other way: p = 2 * 0.5**6
    assert mcnemar_p([1] * 6 + [0, 1], [0] * 6 + [0, 1]) == pytest.approx(2 * 0.5**6)
    assert mcnemar_p([1, 0], [1, 0]) == 1.0


def test_two_runs_appending_to_one_generation_cache_never_interleave_lines(tmp_path):
    """Each run appends its generations under an exclusive lock of the cache file: every line of
    both runs parses, and a later run reads all of them back."""
    import subprocess
    import sys
    import textwrap

    from text_retrieval.rag.reader import GenerationCache

    cache = tmp_path / "generations.jsonl"
    writer = textwrap.dedent(
        """
        import sys
        from types import SimpleNamespace
        from text_retrieval.rag.reader import GenerationCache

        class Echo:  # a reader whose outputs are long enough to span many buffer flushes
            identity = "echo-" + sys.argv[2]
            def generate(self, prompts):
                return [p.text * 40 for p in prompts]

        prompts = [SimpleNamespace(text=f"{sys.argv[2]}-{i}-" + "x" * 200) for i in range(1500)]
        GenerationCache(sys.argv[1]).generate(Echo(), prompts)
        """
    )
    runs = [subprocess.Popen([sys.executable, "-c", writer, str(cache), name]) for name in ("a", "b")]
    assert [run.wait(timeout=120) for run in runs] == [0, 0]
    lines = cache.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3000 and all(json.loads(line)["output"] for line in lines)
    assert len(GenerationCache(cache).entries) == 3000
