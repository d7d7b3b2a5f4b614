"""mteb on clipmag text encoders: queries and documents take their own routes, scores are the head, and
MTEB's retrieval and STS numbers equal clipmag's own evaluators' (SciFact and STS-B subsets, offline).

The MTEB tasks are local (``load_data`` reads the files written here), so nothing comes from the hub.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

mteb = pytest.importorskip("mteb", reason="mteb is not installed (pip install 'clipmag[mteb]')")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from mteb.abstasks import AbsTaskRetrieval, AbsTaskSTS  # noqa: E402
from mteb.abstasks.task_metadata import TaskMetadata  # noqa: E402
from mteb.models import EncoderProtocol, SearchProtocol  # noqa: E402
from mteb.models.model_meta import ScoringFunction  # noqa: E402
from mteb.types import PromptType  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from clipmag.scoring.head_config import HEAD_NAMES  # noqa: E402
from clipmag.scoring.heads import build_head  # noqa: E402
from text_retrieval.data.loaders import STSPairs, load_beir, load_sts  # noqa: E402
from text_retrieval.evaluation.evaluate import evaluate_retrieval, evaluate_sts  # noqa: E402
from text_retrieval.evaluation.mteb_model import ClipmagMTEBEncoder, load_for_mteb  # noqa: E402
from text_retrieval.model.encoder import TextEncoder  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
MAX_LENGTH = 64  # both pipelines encode at this length: SciFact abstracts at 256 tokens are too slow here
# fp32: under bf16 autocast an embedding depends on the batch it was padded in (scores move by ~1e-2), and
# MTEB batches sentence1 and sentence2 apart where clipmag encodes the unique sentences together
SETTINGS = {"max_length": MAX_LENGTH, "precision": "fp32"}
ENCODE = {"batch_size": 64, "show_progress_bar": False}  # clipmag's evaluators encode in batches of 64 too
LEARNED = {"gq": 0.3, "gd": 0.8}  # an asymmetric learnable head, saved as an export
PAIRED_METRICS = {"ndcg_at_10": "NDCG@10", "recall_at_100": "Recall@100", "map_at_100": "MAP@100"}


def _metadata(name: str, kind: str, main_score: str) -> TaskMetadata:
    return TaskMetadata(
        name=name,
        description=f"{name}: files written by the test, read locally",
        reference=None,
        dataset={"path": "local", "revision": "local"},
        type=kind,
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score=main_score,
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation=None,
    )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class LocalBEIRTask(AbsTaskRetrieval):
    """A BEIR folder as an MTEB retrieval task, read by this class (titles and texts kept apart, as
    MTEB's own BEIR tasks hold them), not by clipmag's loader."""

    metadata = _metadata("LocalSciFactSubset", "Retrieval", "ndcg_at_10")

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        corpus = [
            {"id": d["_id"], "title": d["title"], "text": d["text"]} for d in _jsonl(self.folder / "corpus.jsonl")
        ]
        queries = [{"id": q["_id"], "text": q["text"]} for q in _jsonl(self.folder / "queries.jsonl")]
        qrels: dict[str, dict[str, int]] = {}
        for line in (self.folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
            query_id, doc_id, score = line.split("\t")
            qrels.setdefault(query_id, {})[doc_id] = int(score)
        split = {
            "corpus": Dataset.from_list(corpus),
            "queries": Dataset.from_list(queries),
            "relevant_docs": qrels,
            "top_ranked": None,
        }
        self.dataset = {"default": {"test": split}}
        self.data_loaded = True


class LocalSTSTask(AbsTaskSTS):
    """Sentence pairs as an MTEB STS task: sentence1 is the pair's first sentence, sentence2 its second."""

    metadata = _metadata("LocalSTSBSubset", "STS", "cosine_spearman")

    def __init__(self, pairs: STSPairs) -> None:
        super().__init__()
        self.pairs = pairs

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        rows = {"sentence1": self.pairs.a, "sentence2": self.pairs.b, "score": self.pairs.scores.tolist()}
        self.dataset = {"default": {"test": Dataset.from_dict(rows)}}
        self.data_loaded = True


def write_scifact_subset(source: Path, target: Path, num_queries: int, num_others: int) -> Path:
    """The first ``num_queries`` judged test queries (qrels order), every document judged for them and
    the first ``num_others`` other documents (corpus order), as a BEIR folder."""
    lines = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    judged = [line.split("\t") for line in lines[1:]]
    query_ids = list(dict.fromkeys(query_id for query_id, _, _ in judged))[:num_queries]
    kept = [row for row in judged if row[0] in set(query_ids)]
    relevant = {doc_id for _, doc_id, _ in kept}
    corpus, others = [], 0
    for doc in _jsonl(source / "corpus.jsonl"):
        if doc["_id"] in relevant or others < num_others:
            others += doc["_id"] not in relevant
            corpus.append(doc)
    queries = [q for q in _jsonl(source / "queries.jsonl") if q["_id"] in set(query_ids)]
    (target / "qrels").mkdir(parents=True)
    (target / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (target / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (target / "qrels" / "test.tsv").write_text("\n".join([lines[0], *("\t".join(r) for r in kept)]) + "\n")
    return target


def mteb_scores(model: ClipmagMTEBEncoder, task: Any) -> dict[str, float]:
    result = mteb.evaluate(model, task, cache=None, encode_kwargs=dict(ENCODE), show_progress_bar=False)
    return result.task_results[0].scores["test"][0]


def assert_retrieval_agrees(model: ClipmagMTEBEncoder, folder: Path, cache_dir: Path | None = None) -> float:
    """MTEB's NDCG@10, Recall@100 and MAP@100 equal clipmag's to 1e-4 (MTEB rounds to 5 decimals)."""
    ours = evaluate_retrieval(model.model, load_beir(folder), cache_dir=cache_dir, show_progress=False)
    theirs = mteb_scores(model, LocalBEIRTask(folder))
    for mteb_key, our_key in PAIRED_METRICS.items():
        assert theirs[mteb_key] == pytest.approx(ours[our_key], abs=1e-4), (model.model.head.name, mteb_key)
    return ours["NDCG@10"]


@pytest.fixture(scope="module")
def qnorm_model() -> ClipmagMTEBEncoder:
    """Distinct prefixes, so the two routes encode differently."""
    return load_for_mteb(MODEL, norm="qnorm", query_prefix="query: ", document_prefix="passage: ", **SETTINGS)


def with_head(encoder: TextEncoder, norm: str) -> TextEncoder:
    """The same weights and settings under another head."""
    return TextEncoder(
        encoder.model,
        encoder.tokenizer,
        head=build_head(norm),
        pooling=encoder.pooling,
        query_prefix=encoder.query_prefix,
        document_prefix=encoder.document_prefix,
        query_max_length=encoder.query_max_length,
        document_max_length=encoder.document_max_length,
        precision=encoder.precision,
    )


def _loader(texts: list[str]) -> DataLoader:
    return DataLoader(Dataset.from_dict({"text": texts}), batch_size=2)


def test_routes_and_head_scores(qnorm_model: ClipmagMTEBEncoder) -> None:
    encoder, head = qnorm_model.model, qnorm_model.model.head
    assert isinstance(qnorm_model, EncoderProtocol) and not isinstance(qnorm_model, SearchProtocol)
    texts = ["a study of protein folding", "mice lacking the gene live longer", "vitamin D and fractures"]
    routed = {
        prompt: qnorm_model.encode(
            _loader(texts),
            task_metadata=LocalBEIRTask.metadata,
            hf_split="test",
            hf_subset="default",
            prompt_type=prompt,
        )
        for prompt in (PromptType.query, PromptType.document, None)
    }
    for prompt, side in ((PromptType.query, "query"), (PromptType.document, "document"), (None, "query")):
        np.testing.assert_allclose(routed[prompt], encoder.encode(texts, side, show_progress=False), atol=1e-5)
    assert np.abs(routed[PromptType.query] - routed[PromptType.document]).max() > 1e-3

    q, d = torch.from_numpy(routed[PromptType.query]), torch.from_numpy(routed[PromptType.document])
    torch.testing.assert_close(qnorm_model.similarity(q, d), head.score(q, d))
    torch.testing.assert_close(qnorm_model.similarity_pairwise(q.numpy(), d.numpy()), head.paired(q, d))
    assert (qnorm_model.similarity(q, d) - qnorm_model.similarity(d, q).T).abs().max() > 1e-3  # order matters
    assert qnorm_model.similarity(q[0], d).shape == (1, len(texts))


def test_model_meta(qnorm_model: ClipmagMTEBEncoder, tmp_path: Path) -> None:
    meta = qnorm_model.mteb_model_meta
    assert meta.similarity_fn_name is ScoringFunction.CUSTOM  # mteb's FAISS backend refuses it
    assert meta.revision == qnorm_model.model.weights_fingerprint() and meta.embed_dim == 384
    assert meta.experiment_kwargs["norm"] == "qnorm" and "norm_qnorm" in meta.experiment_name
    reloaded = meta.load_model()  # what mteb does with a model meta: the same head, settings and weights
    assert isinstance(reloaded, ClipmagMTEBEncoder) and reloaded.model.head.name == "qnorm"
    assert reloaded.model.query_prefix == "query: " and reloaded.mteb_model_meta.revision == meta.revision
    fixed = {"cosine": ScoringFunction.COSINE, "dot": ScoringFunction.DOT_PRODUCT}
    for norm, scoring in fixed.items():
        assert load_for_mteb(MODEL, norm=norm).mteb_model_meta.similarity_fn_name is scoring
    with pytest.raises(ValueError, match="revision 'main' was asked for"):
        ClipmagMTEBEncoder(MODEL, revision="main")


def test_sts_scores_sentence1_as_query(qnorm_model: ClipmagMTEBEncoder, shared_data: Path) -> None:
    full = load_sts(shared_data / "sts" / "stsbenchmark", "test")[0]
    pairs = STSPairs("stsb-subset", full.a[:60], full.b[:60], full.scores[:60])
    ours = evaluate_sts(qnorm_model.model, pairs, show_progress=False)
    theirs = mteb_scores(qnorm_model, LocalSTSTask(pairs))
    assert theirs["spearman"] == pytest.approx(ours["spearman"], abs=1e-4)  # head.paired(sentence1, sentence2)
    assert abs(theirs["spearman"] - ours["spearman_reversed"]) > 5e-4  # not head.paired(sentence2, sentence1)
    cosine = evaluate_sts(with_head(qnorm_model.model, "cosine"), pairs, show_progress=False)
    assert theirs["cosine_spearman"] == pytest.approx(cosine["spearman"], abs=1e-4)  # the head plays no part
    assert abs(theirs["cosine_spearman"] - theirs["spearman"]) > 1e-3


def test_retrieval_qnorm_matches_clipmag(qnorm_model: ClipmagMTEBEncoder, shared_data: Path, tmp_path: Path) -> None:
    folder = write_scifact_subset(shared_data / "beir" / "scifact", tmp_path / "scifact", 15, 60)
    assert_retrieval_agrees(qnorm_model, folder)


@pytest.mark.slow
def test_retrieval_every_head_matches_clipmag(shared_data: Path, tmp_path: Path) -> None:
    """100 queries, their documents and 250 others; the learnable head comes from an export."""
    folder = write_scifact_subset(shared_data / "beir" / "scifact", tmp_path / "scifact", 100, 250)
    export = tmp_path / "learnable-export"
    TextEncoder.from_pretrained(MODEL, norm="learnable", head_settings=LEARNED).save_pretrained(export)
    ndcg = {}
    for norm in HEAD_NAMES:
        source, override = (export, None) if norm == "learnable" else (MODEL, norm)
        model = load_for_mteb(source, norm=override, **SETTINGS)
        assert model.model.head.name == norm
        if norm == "learnable":
            assert model.model.head.gammas() == pytest.approx((LEARNED["gq"], LEARNED["gd"]))
        ndcg[norm] = assert_retrieval_agrees(model, folder, cache_dir=tmp_path / "cache")
    assert abs(ndcg["qnorm"] - ndcg["cosine"]) > 1e-3  # the head, not a fixed cosine, ranks in MTEB
