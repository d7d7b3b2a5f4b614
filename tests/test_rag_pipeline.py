"""RAG end to end on a tiny fixture: oracle and tiny random readers, heads, outputs, bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from rag_fixtures import QUESTIONS
from text_fixtures import minilm_path

from clipmag.config.entry import run_entry_point
from text_retrieval.rag.answers import has_answer
from text_retrieval.rag.cli import main
from text_retrieval.rag.config import RagConfig, RagDataConfig, RagHeads, ReaderConfig, RetrievalConfig
from text_retrieval.rag.pipeline import run_rag
from text_retrieval.rag.prompts import Prompt
from text_retrieval.rag.reader import load_reader


def _config(files: tuple[Path, Path], output: Path, norms: Sequence[str] = (), reader: str = "none", **kw) -> RagConfig:
    data = RagDataConfig(corpus=str(files[0]), qa=[str(files[1])])
    retrieval = RetrievalConfig(models=[minilm_path()], max_length=64, cache_dir=None, depth=8)
    reader_cfg = ReaderConfig(name_or_path=reader, cache="", **kw)
    return RagConfig(data=data, retrieval=retrieval, head=RagHeads(list(norms)), reader=reader_cfg, output=str(output))


class OracleReader:
    """Copies a gold answer when one is in the prompt's passages: EM must then equal accuracy@k."""

    identity = "oracle"
    uses_chat = False
    max_input_tokens = 10_000

    def __init__(self) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(minilm_path())

    def generate(self, prompts: Sequence[Prompt]) -> list[str]:
        out = []
        for prompt in prompts:
            context = " ".join(prompt.passages)
            found = [a for a in prompt.question.answers if has_answer([a], context)]
            out.append(found[0] + "\nQuestion: ignored" if found else "")
        return out


def _questions(folder: Path, name: str = "tiny") -> list[dict]:
    return [json.loads(line) for line in (folder / f"{name}.questions.jsonl").read_text().splitlines()]


def test_oracle_reader_em_equals_accuracy_at_k(tiny_rag_files, tmp_path):
    cfg = _config(tiny_rag_files, tmp_path / "out", reader="oracle", top_k=2, few_shot=2)
    (row,) = run_rag(cfg, reader=OracleReader(), show_progress=False)
    metrics = row.metrics["tiny"]
    assert metrics["EM"] == metrics["accuracy@2"] == metrics["contains"]
    assert 0 < metrics["EM"] < 1 and metrics["num_questions"] == len(QUESTIONS)
    for record in _questions(tmp_path / "out"):
        hit = record["first_hit_rank"] is not None and record["first_hit_rank"] <= 2
        assert record["EM"] == float(hit) and record["answer"] == (record["generated"].split("\n")[0] if hit else "")
        assert len(record["retrieved"]) == 8 and record["truncated_passages"] == 0
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(result["metrics"]["tiny"]) >= {"accuracy@1", "accuracy@5", "accuracy@2", "EM", "F1", "contains"}
    assert result["head"]["head"] == {"name": "cosine"} and result["head"]["pooling"] == "mean"
    assert result["config"]["reader"]["top_k"] == 2 and result["versions"]["bm25s"] != "not installed"


def test_heads_change_only_what_they_should(tiny_rag_files, tmp_path):
    cfg = _config(tiny_rag_files, tmp_path / "out", norms=["cosine", "dot", "qnorm", "dnorm"])
    cfg.retrieval.bm25 = True
    rows = {row.label: row for row in run_rag(cfg, show_progress=False)}
    assert list(rows) == ["cosine", "dot", "qnorm", "dnorm", "bm25"]
    ranked = {label: [r["retrieved"] for r in _questions(tmp_path / "out" / label)] for label in rows}
    ids = {label: [[pid for pid, _ in hits] for hits in lists] for label, lists in ranked.items()}
    assert ids["qnorm"] == ids["dot"] and ids["dnorm"] == ids["cosine"]
    assert rows["qnorm"].metrics == rows["dot"].metrics and rows["dnorm"].metrics == rows["cosine"].metrics
    assert ranked["qnorm"] != ranked["dot"]  # same order, different scores (|q| divides them out)
    assert "EM" not in rows["cosine"].metrics["tiny"]
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| qnorm |" in table and "| bm25 |" in table and "acc@5 vs cosine" in table
    bm25 = json.loads((tmp_path / "out" / "bm25" / "results.json").read_text())
    assert bm25["head"] is None and bm25["retriever"]["kind"] == "bm25"


def _tiny_model(folder: Path, kind: str) -> Path:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, T5Config, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    if kind == "seq2seq":
        config = T5Config(
            vocab_size=len(tokenizer), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, decoder_start_token_id=0
        )
        model = T5ForConditionalGeneration(config)
    else:
        config = LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
        )
        model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
def test_tiny_random_readers_end_to_end_with_cache(tiny_rag_files, tmp_path, kind):
    folder = _tiny_model(tmp_path / kind, kind)
    cfg = _config(tiny_rag_files, tmp_path / "out", ["cosine", "dnorm"], str(folder), max_new_tokens=3, few_shot=0)
    cfg.reader.max_input_tokens, cfg.reader.cache = 120, str(tmp_path / "gen.jsonl")
    run_rag(cfg, show_progress=False)
    records = _questions(tmp_path / "out" / "cosine")
    assert all(0 <= r["EM"] <= r["F1"] + 1e-9 <= 1 + 1e-9 and isinstance(r["generated"], str) for r in records)
    assert all(r["truncated_passages"] > 0 and r["prompt_tokens"] <= 120 + 5 for r in records)  # the budget held
    # dnorm retrieves what cosine does, so its prompts are answered from the cache
    caches = [
        json.loads((tmp_path / "out" / h / "results.json").read_text())["generation_cache"] for h in ("cosine", "dnorm")
    ]
    assert caches == [{"hits": 0, "misses": len(QUESTIONS)}, {"hits": len(QUESTIONS), "misses": len(QUESTIONS)}]
    assert [r["generated"] for r in _questions(tmp_path / "out" / "dnorm")] == [r["generated"] for r in records]
    assert len((tmp_path / "gen.jsonl").read_text().splitlines()) == len(QUESTIONS)


def test_reader_that_cannot_be_loaded_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"cannot load reader .*no_such_model"):
        load_reader(str(tmp_path / "no_such_model"))
    with pytest.raises(FileNotFoundError, match=r"reader GGUF file not found: .*missing\.gguf"):
        load_reader(str(tmp_path / "missing.gguf"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(FileNotFoundError, match=r"cannot load reader .*broken"):
        load_reader(str(broken))


def test_cli_prints_table_and_reports_bad_input(tiny_rag_files, tmp_path, capsys):
    corpus, qa = tiny_rag_files
    args = ["--corpus", str(corpus), "--qa", str(qa), "--model", minilm_path(), "--reader", "none"]
    args += ["--norm", "cosine", "qnorm", "--output", str(tmp_path / "cli"), "--quiet", "retrieval.cache_dir=null"]
    rows = main([*args, "--max-length", "64", "--top-k", "3"])
    assert [r.label for r in rows] == ["cosine", "qnorm"]
    assert "**tiny** (6 questions, x100)" in capsys.readouterr().out
    main(["--compare", str(tmp_path / "cli" / "cosine"), str(tmp_path / "cli" / "qnorm")])
    assert "| qnorm |" in capsys.readouterr().out
    qa.write_text(qa.read_text() + "a question with no answers\n")
    with pytest.raises(SystemExit) as stop:
        run_entry_point(main, args)
    assert stop.value.code == 2
    assert "tiny.test.txt, line 7: expected 2 tab-separated fields" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_entry_point(main, ["--reader", "none", "--output", str(tmp_path / "x")])
    assert "give a passage corpus and at least one QA file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_entry_point(main, [*args, "--top-k", "200"])
    assert "reader.top_k (--top-k) 200 is more than retrieval.depth 100" in capsys.readouterr().err
