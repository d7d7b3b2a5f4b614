"""The paper's other two starting points: a decoder LM pooled at an appended EOS token, and random
initialisation of a named architecture. A 2-layer Qwen2 (hidden 32) with a byte-level BPE
tokenizer trained on the fly keeps everything offline and a few seconds long."""

from __future__ import annotations

import pytest
import torch
from text_fixtures import tiny_train_args, write_code_search_set, write_tiny_decoder

from clipmag.config.build import build_config
from clipmag.results.record import read_results
from clipmag.runtime.distributed import DistributedContext
from text_retrieval.cli import main as train_main
from text_retrieval.config import TextConfig
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.task import TextRetrievalTask


@pytest.fixture(scope="module")
def decoder_setup(tmp_path_factory):
    """A tiny Qwen2 decoder whose tokenizer adds no EOS, code-search shards and a BEIR set."""
    root = tmp_path_factory.mktemp("decoder")
    write_tiny_decoder(root / "decoder", write_code_search_set(root))
    return root


def test_last_token_pooling_appends_eos_once(decoder_setup):
    encoder = TextEncoder.from_pretrained(decoder_setup / "decoder", pooling="last", max_length=8)
    eos_id = encoder.tokenizer.eos_token_id
    batch = encoder.tokenize(["open the file", "parse " * 40], "query")
    lengths = batch["attention_mask"].sum(dim=1)
    assert lengths[1] == 8  # truncation leaves room for the EOS
    assert [int(batch["input_ids"][i, n - 1]) for i, n in enumerate(lengths)] == [eos_id, eos_id]
    again = TextEncoder(encoder.model, encoder.tokenizer, pooling="last")  # already appends: not twice
    assert again.tokenizer("a")["input_ids"][-2:] != [eos_id, eos_id]
    mean = TextEncoder.from_pretrained(decoder_setup / "decoder", pooling="mean")
    assert mean.tokenizer("a")["input_ids"][-1] != eos_id  # only last-token pooling needs it


def test_random_init_is_seeded_and_fresh(decoder_setup):
    def build(*overrides: str) -> dict[str, torch.Tensor]:
        args = [f"model.name={decoder_setup / 'decoder'}", "data.validation=[]", *overrides]
        task = TextRetrievalTask(
            build_config(TextConfig, None, args), DistributedContext(0, 1, 0, torch.device("cpu"), None)
        )
        return task.build_encoder().model.state_dict()

    state = torch.random.get_rng_state()
    first, again = build("model.init=random", "train.seed=3"), build("model.init=random", "train.seed=3")
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's random stream is untouched
    other, pretrained = build("model.init=random", "train.seed=4"), build()
    weights = [k for k in first if k.endswith("proj.weight")]
    assert weights and all(torch.equal(first[k], again[k]) for k in first)
    assert all(not torch.equal(first[k], other[k]) and not torch.equal(first[k], pretrained[k]) for k in weights)


def test_random_init_decoder_trains_exports_and_evaluates(decoder_setup, tmp_path):
    out = tmp_path / "run"
    extra = ("model.init=random", "model.pooling=last", "train.steps=4", "train.eval_every=2", "--norm", "dnorm")
    results = train_main(tiny_train_args(decoder_setup / "decoder", decoder_setup, out, *extra))
    assert results == read_results(out / "results.json")
    assert results["head"]["pooling"] == "last" and results["head"]["head"]["name"] == "dnorm"
    assert 0.0 <= results["metrics"]["beir"]["NDCG@10"] <= 1.0
    export = TextEncoder.from_pretrained(out / "export", precision="fp32")
    assert export.pooling == "last" and export.head.name == "dnorm"
    from sentence_transformers import SentenceTransformer

    texts = ["def add(a, b): return a + b", "sum two numbers"]
    ours = export.head.transform_document(torch.from_numpy(export.encode(texts, "document", show_progress=False)))
    theirs = SentenceTransformer(str(out / "export"), device="cpu").encode(texts, convert_to_numpy=True)
    assert ours.numpy() == pytest.approx(theirs, abs=1e-5)  # the document route; the saved tokenizer appends the EOS


def test_random_start_is_recorded_and_its_seed_can_be_fixed(decoder_setup, tmp_path):
    """A random start says so in results.json (run.init, run.init_seed), in the export's head record
    and model card; ``model.init_seed`` fixes the weights whatever the training seed."""

    def task(*overrides: str) -> TextRetrievalTask:
        args = [f"model.name={decoder_setup / 'decoder'}", "data.validation=[]", *overrides]
        return TextRetrievalTask(
            build_config(TextConfig, None, args), DistributedContext(0, 1, 0, torch.device("cpu"), None)
        )

    pinned = [task("model.init=random", "model.init_seed=7", f"train.seed={s}").build_encoder() for s in (0, 1)]
    assert all(torch.equal(a, b) for a, b in zip(*(e.model.state_dict().values() for e in pinned)))
    assert pinned[0].head_record().random_init_seed == 7
    pretrained = task()
    assert pretrained.run_identity()["init"] == "pretrained"
    assert pretrained.build_encoder().head_record().random_init_seed is None
    out = tmp_path / "run"
    extra = ("model.init=random", "model.init_seed=5", "model.pooling=last", "train.steps=0")
    results = train_main(tiny_train_args(decoder_setup / "decoder", decoder_setup, out, *extra))
    assert results["run"]["init"] == "random" and results["run"]["init_seed"] == 5
    assert results["head"]["random_init_seed"] == 5
    assert "random weights (seed 5)" in (out / "export" / "README.md").read_text()
    assert "base_model:" not in (out / "export" / "README.md").read_text()
