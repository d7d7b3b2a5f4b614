"""Evaluation at corpus scale: exact search whatever the backend, chunked and memory-mapped search,
approximate indexes with their recall, a resumable sharded corpus cache, and two processes under
torchrun giving the results of one."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import REPO, run_python
from text_fixtures import TINY_SIZES, minilm_path, write_code_search_set

from clipmag.scoring.heads import build_head
from clipmag.storage.folder_lock import LOCK_FILE
from text_retrieval.evaluation.metrics import read_trec_run
from text_retrieval.retrieval.ann import recall_vs_exact
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.index import RetrievalSettings, query_factor
from text_retrieval.retrieval.search import ExactIndex, build_index

HEADS = {"cosine": {}, "dot": {}, "qnorm": {}, "dnorm": {}, "learnable": {"gq": 0.3, "gd": 0.7}}


def _clustered(n: int, dim: int, seed: int, centers: int = 500) -> np.ndarray:
    """Embedding-like synthetic vectors: clusters, and log-normal norms so magnitude matters."""
    rng = np.random.default_rng(seed)
    middle = np.random.default_rng(99).standard_normal((centers, dim)).astype(np.float32) * 2
    x = middle[rng.integers(0, centers, n)] + rng.standard_normal((n, dim)).astype(np.float32)
    return (x * rng.lognormal(0.0, 0.5, (n, 1))).astype(np.float32)


@pytest.mark.parametrize("name", list(HEADS))
def test_exact_backends_chunks_and_memory_maps_agree(name, tmp_path):
    head = build_head(name, **HEADS[name])
    docs, queries = _clustered(3000, 32, 0), _clustered(300, 32, 1)
    with torch.no_grad():
        expected = head.score(torch.from_numpy(queries), torch.from_numpy(docs)).topk(50, dim=1)
    factor = query_factor(head, queries)[:, None]  # the index scores raw queries
    np.save(tmp_path / "docs.npy", docs.astype(np.float16))
    mapped = np.load(tmp_path / "docs.npy", mmap_mode="r")
    for backend in ("torch", "faiss", "auto"):
        for source, memory_gb in ((docs, 4.0), (mapped, 1e-4)):  # 1e-4 GB: chunks of 1,024 rows
            index = ExactIndex(source, head, RetrievalSettings(backend=backend, memory_gb=memory_gb))
            scores, positions = index.search(queries, 50)
            tolerance = 1e-4 if source is docs else 2e-2  # fp16 storage
            np.testing.assert_allclose(scores * factor, expected.values, rtol=tolerance, atol=tolerance)
            if source is docs:
                assert (positions == expected.indices.numpy()).mean() > 0.999  # only exact ties may swap
            assert index.described["backend"] in ("torch", "faiss")
            assert index.described["chunks"] == (1 if source is docs else 3)
    assert set(ExactIndex(docs, head).described) >= {"method", "chunks"}


def test_a_streamed_corpus_scored_slice_by_slice_finds_the_same_hits(tmp_path):
    """Queries that fit one score buffer read a memory-mapped corpus a slice at a time (pages released
    after each): the same hits as the corpus searched in memory, across slice and chunk edges."""
    head = build_head("qnorm")
    docs, queries = _clustered(3000, 32, 0), _clustered(20, 32, 1)
    np.save(tmp_path / "docs.npy", docs)
    streamed = ExactIndex(np.load(tmp_path / "docs.npy", mmap_mode="r"), head, RetrievalSettings(memory_gb=1e-4))
    streamed.slice_rows = 300  # chunks of 1,024 rows in slices of 300
    scores, positions = streamed.search(queries, 40)
    in_memory = ExactIndex(docs, head).search(queries, 40)
    np.testing.assert_allclose(scores, in_memory[0], rtol=1e-5, atol=1e-5)
    assert (positions == in_memory[1]).mean() > 0.999 and streamed.described["chunks"] == 3


def test_approximate_index_recall_for_every_head():
    """HNSW with default settings on a synthetic 20k-vector corpus: recall@10 vs exact >= 0.95. The
    ranking of a head depends on its document side only, so heads sharing gd share an index."""
    docs, queries = _clustered(20_000, 32, 0), _clustered(200, 32, 1)
    recall = {}
    for gd, names in ((1.0, ("cosine", "dnorm")), (0.0, ("dot", "qnorm")), (0.7, ("learnable",))):
        head = build_head(names[0], **HEADS[names[0]])
        assert head.gammas()[1] == pytest.approx(gd)
        approximate = build_index(docs, head, RetrievalSettings(method="hnsw"))
        found = recall_vs_exact(approximate, ExactIndex(docs, head), queries, k=10, sample=200)
        recall.update(dict.fromkeys(names, found["recall@10"]))
    assert min(recall.values()) >= 0.95, recall
    ivf = build_index(docs[:4000], build_head("dot"), RetrievalSettings(method="ivf"))
    assert ivf.described["nlist"] > 1 and ivf.search(queries[:3], 10)[1].shape == (3, 10)


class _Encoder:
    """Just enough of TextEncoder for the corpus cache; ``fail_after`` chunks it raises mid-chunk."""

    name_or_path, pooling, document_prefix, document_max_length, dim = "fake/model", "mean", "", 16, 4
    precision, device = "fp32", torch.device("cpu")

    def __init__(self, fail_after: int | None = None):
        self.chunks, self.fail_after = [], fail_after

    def weights_fingerprint(self) -> str:
        return "w0"

    def encode(self, texts, side, batch_size=64, show_progress=True):
        if self.fail_after is not None and len(self.chunks) == self.fail_after:
            raise KeyboardInterrupt("killed mid-corpus")
        self.chunks.append(texts[0])
        return np.array([[len(t), i, 1.5, -2] for i, t in enumerate(texts)], dtype=np.float32)


def test_interrupted_encode_resumes_without_reusing_a_partial_chunk(tmp_path):
    texts = [f"passage {i} " * (i % 5 + 1) for i in range(23)]
    settings = RetrievalSettings(chunk_size=5, cache_dtype="fp16")
    whole = encode_corpus(_Encoder(), texts, tmp_path / "whole", "toy", settings=settings)
    killed = _Encoder(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(killed, texts, tmp_path / "cache", "toy", settings=settings)
    (folder,) = (tmp_path / "cache").iterdir()
    partial = np.load(folder / "embeddings.partial.npy", mmap_mode="r+")
    partial[10:12] = 7.0  # rows of the third chunk written before the kill: no marker, so re-encoded
    partial.flush()
    resumed = _Encoder()
    again = encode_corpus(resumed, texts, tmp_path / "cache", "toy", settings=settings)
    assert resumed.chunks == [texts[10], texts[15], texts[20]]  # chunks 0 and 1 were done
    assert again.dtype == np.float16
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_FILE, "embeddings.npy", "identity.json"]
    np.testing.assert_array_equal(again, whole)


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    """A tiny BERT (MiniLM's tokenizer) saved as a qnorm model, and the stdlib code-search BEIR set."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from text_retrieval.model.encoder import TextEncoder

    root = tmp_path_factory.mktemp("scalable")
    write_code_search_set(root)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, num_attention_heads=2, **TINY_SIZES))
    TextEncoder(model, tokenizer, head=build_head("qnorm"), document_max_length=48).save_pretrained(root / "model")
    return root


def _eval_args(root, out, *extra: str) -> list[str]:
    common = ["--model", str(root / "model"), "--data", str(root / "beir"), "--output", str(out), "--top-k", "20"]
    return [*common, "--chunk-size", "8", "--search-backend", "torch", "--batch-size", "4", "--quiet", *extra]


@pytest.mark.slow
def test_two_processes_give_the_results_of_one(tiny_export, tmp_path):
    from text_retrieval.evaluation.cli import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the torchrun processes run one thread each (conftest.script_env)
    try:
        (one,) = main(_eval_args(tiny_export, tmp_path / "one"))
    finally:
        torch.set_num_threads(threads)
    run_python(REPO / "scripts" / "eval_text.py", _eval_args(tiny_export, tmp_path / "two"), nproc=2)
    (two_file,) = (tmp_path / "two").glob("*.json")
    two = json.loads(two_file.read_text())
    assert not (tmp_path / "two" / "corpus_cache.tmp").exists()  # the temporary shared cache is removed
    assert one["metrics"] == pytest.approx(two["metrics"], abs=1e-6) and 0 < one["metrics"]["NDCG@10"] <= 1
    runs = [read_trec_run(r["run_file"]) for r in (one, two)]
    top10 = [{q: sorted(hits, key=lambda d: -hits[d])[:10] for q, hits in run.items()} for run in runs]
    assert top10[0] == top10[1] and len(top10[0]) == 8
    assert two["search"]["backend"] == "torch" and two["search"]["settings"]["chunk_size"] == 8
