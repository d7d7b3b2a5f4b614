"""Wikipedia articles from a MediaWiki XML dump, as plain prose split into DPR-style passages.

The bundled RAG set needs real encyclopaedic text that installs offline; gensim's test data ships
a shortened English Wikipedia dump. Pages come from gensim's dump reader (main namespace,
redirects dropped) and the markup is parsed with mwparserfromhell, a maintained MediaWiki parser.
Cleaning rule, chosen to keep prose the way DPR's text-only passages do:

* the page is cut at the first level-2 section named References, External links, See also,
  Further reading, Notes, Bibliography, Sources, Citations or Footnotes;
* templates (infoboxes, citation templates), headings, comments, ``<ref>`` and other non-prose
  tags (tables, galleries, math, ...) and links into other namespaces (File:, Category:, language
  links) are removed; other links keep their visible text;
* list markers are stripped, empty brackets left by removed templates dropped, white space collapsed.

DPR split each article's text into disjoint 100-word passages (the last one shorter) with the
article title beside them; ``split_passages`` does the same, numbering ids from 1 in article order.
"""

from __future__ import annotations

import bz2
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import mwparserfromhell
from gensim.corpora.wikicorpus import extract_pages
from mwparserfromhell.nodes import Comment, Heading, Tag, Template, Wikilink
from mwparserfromhell.wikicode import Wikicode

from text_retrieval.rag.data import Passage

__all__ = ["Article", "gensim_wiki_dump", "clean_wikitext", "read_articles", "split_passages"]

GENSIM_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
END_SECTIONS = frozenset(
    {"references", "external links", "see also", "further reading", "notes", "bibliography", "sources", "citations"}
    | {"footnotes"}
)
DROPPED_TAGS = frozenset(
    {"ref", "references", "table", "gallery", "math", "div", "timeline", "imagemap", "syntaxhighlight", "source"}
    | {"score", "chem", "blockquote", "sup", "sub"}
)
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:])")


@dataclass(frozen=True)
class Article:
    """A cleaned article: title and prose paragraphs."""

    title: str
    paragraphs: tuple[str, ...]


def gensim_wiki_dump() -> Path:
    """The shortened English Wikipedia dump in gensim's test data (gensim is a dependency)."""
    from gensim.test.utils import datapath

    path = Path(datapath(GENSIM_DUMP))
    if not path.is_file():
        raise FileNotFoundError(f"gensim's Wikipedia test dump is missing: {path} (reinstall gensim)")
    return path


def _drop(node: object) -> bool:
    if isinstance(node, (Template, Heading, Comment)):
        return True
    if isinstance(node, Tag):
        return node.wiki_markup == "{|" or str(node.tag).strip().lower() in DROPPED_TAGS
    return isinstance(node, Wikilink) and ":" in str(node.title)


def _prune(code: Wikicode) -> None:
    """Drop unwanted nodes at every depth in one pass (``Wikicode.remove`` searches the tree per call)."""
    code.nodes = [node for node in code.nodes if not _drop(node)]
    for node in code.nodes:
        for child in (getattr(node, "contents", None), getattr(node, "text", None), getattr(node, "title", None)):
            if isinstance(child, Wikicode):
                _prune(child)


def clean_wikitext(text: str) -> list[str]:
    """Prose paragraphs of one page's wikitext (rules in the module docstring)."""
    code = mwparserfromhell.parse(text)
    for heading in code.filter_headings(recursive=False):
        if heading.level == 2 and heading.title.strip_code().strip().lower() in END_SECTIONS:
            del code.nodes[code.index(heading) :]
            break
    _prune(code)
    paragraphs = []
    for line in code.strip_code(normalize=True, collapse=True).split("\n"):
        line = _EMPTY_BRACKETS.sub("", line.strip().lstrip("*#:;").strip())
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(line.split()))
        if line:
            paragraphs.append(line)
    return paragraphs


def _pages(dump: Path) -> Iterator[tuple[str, str]]:
    with bz2.BZ2File(dump) as handle:
        for title, text, _page_id in extract_pages(handle, filter_namespaces=("0",)):
            if not text.lstrip().lower().startswith("#redirect"):
                yield title, text


def read_articles(dump: str | Path | None = None, max_articles: int | None = None) -> list[Article]:
    """Cleaned main-namespace articles of a ``.xml.bz2`` dump (default: gensim's), in dump order."""
    dump = Path(dump) if dump is not None else gensim_wiki_dump()
    articles = []
    for title, text in _pages(dump):
        paragraphs = clean_wikitext(text)
        if paragraphs:
            articles.append(Article(title, tuple(paragraphs)))
        if max_articles is not None and len(articles) >= max_articles:
            break
    return articles


def split_passages(articles: Iterable[Article], words: int = 100) -> list[Passage]:
    """Disjoint ``words``-word passages per article, ids ``1, 2, ...`` (DPR's splitting)."""
    if words < 1:
        raise ValueError(f"passage length must be at least 1 word, got {words}")
    passages: list[Passage] = []
    for article in articles:
        tokens = " ".join(article.paragraphs).split()
        for start in range(0, len(tokens), words):
            passages.append(Passage(str(len(passages) + 1), article.title, " ".join(tokens[start : start + words])))
    return passages
