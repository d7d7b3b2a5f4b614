"""Answer matching for open-domain QA: DPR's has-answer rule and SQuAD's exact match and token F1.

Two families of rules, because the two halves of a RAG evaluation are scored differently in the
literature and our numbers must compare with both:

* **has-answer** (retrieval accuracy@k, and our "answer contained" reader metric), as DPR defines
  it: the text and each answer are put in Unicode NFD, split into tokens (runs of letters, digits
  and combining marks, or one non-space, non-control symbol), lower-cased, and an answer matches
  when its token sequence occurs contiguously in the text's tokens. So "1" never matches inside
  "1990" and "U.S." matches "u . s .". CuratedTREC answers are regular expressions, searched
  case-insensitively in the NFD text. An answer with no tokens never matches (DPR would match it
  everywhere).
* **SQuAD** exact match and F1 (the reader): lower-case, drop ASCII punctuation, drop the articles
  a/an/the, collapse white space; EM compares the strings, F1 the bags of tokens. Both take the
  maximum over the gold aliases. An empty prediction or alias scores F1 1 only against an empty
  counterpart (SQuAD 2.0's rule). For regular-expression answers EM and F1 are 1 when a pattern
  matches the whole stripped prediction (case-insensitive), else 0.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import regex

__all__ = [
    "MatchType",
    "tokens",
    "contains_tokens",
    "has_answer",
    "normalize_answer",
    "exact_match",
    "f1_score",
    "score_prediction",
]

MatchType = Literal["string", "regex"]

_TOKEN = regex.compile(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_REGEX_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE


def tokens(text: str) -> list[str]:
    """DPR's simple tokenisation of ``text`` (NFD, uncased); the unit of the has-answer rule."""
    return [t.lower() for t in _TOKEN.findall(unicodedata.normalize("NFD", text))]


def contains_tokens(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """True when ``needle`` occurs as a contiguous run of ``haystack`` (never for an empty needle)."""
    width = len(needle)
    if width == 0:
        return False
    first = needle[0]
    return any(
        haystack[i] == first and list(haystack[i : i + width]) == list(needle) for i in range(len(haystack) - width + 1)
    )


def _pattern(answer: str) -> re.Pattern[str] | None:
    """A CuratedTREC pattern, or None when it does not compile (DPR counts such a pattern as no match)."""
    try:
        return re.compile(unicodedata.normalize("NFD", answer), flags=_REGEX_FLAGS)
    except re.error:
        return None


def has_answer(
    answers: Sequence[str], text: str, match: MatchType = "string", text_tokens: Sequence[str] | None = None
) -> bool:
    """True when any answer occurs in ``text`` under DPR's rule (see the module docstring).

    ``text_tokens`` (``tokens(text)``, computed once by a caller that tests many answer sets
    against the same passage) skips re-tokenising the text.
    """
    if match == "regex":
        normalized = unicodedata.normalize("NFD", text)
        return any(p is not None and p.search(normalized) for p in map(_pattern, answers))
    if match != "string":
        raise ValueError(f"unknown answer match {match!r}; valid: string, regex")
    haystack = tokens(text) if text_tokens is None else text_tokens
    return any(contains_tokens(haystack, tokens(answer)) for answer in answers)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _f1(prediction: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _regex_full_match(prediction: str, answers: Sequence[str]) -> float:
    stripped = unicodedata.normalize("NFD", prediction.strip())
    return float(any(p is not None and p.fullmatch(stripped) for p in map(_pattern, answers)))


def exact_match(prediction: str, answers: Sequence[str], match: MatchType = "string") -> float:
    """1.0 when the normalised prediction equals a normalised alias (regex: matches it whole)."""
    if match == "regex":
        return _regex_full_match(prediction, answers)
    normalized = normalize_answer(prediction)
    return float(any(normalized == normalize_answer(a) for a in answers))


def f1_score(prediction: str, answers: Sequence[str], match: MatchType = "string") -> float:
    """SQuAD token F1, the maximum over aliases (regex answers: same as exact match)."""
    if match == "regex":
        return _regex_full_match(prediction, answers)
    return max((_f1(prediction, a) for a in answers), default=0.0)


def score_prediction(prediction: str, answers: Sequence[str], match: MatchType = "string") -> dict[str, float]:
    """``{"EM", "F1", "contains"}`` of one generated answer; ``contains`` is the has-answer rule."""
    return {
        "EM": exact_match(prediction, answers, match),
        "F1": f1_score(prediction, answers, match),
        "contains": float(has_answer(answers, prediction, match)),
    }
