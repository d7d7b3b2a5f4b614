"""Hard-negative mining: the selection rules, the mining under a head, the shards it writes (and
that the trainer's hard-negatives path reads), and agreement with sentence-transformers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from text_fixtures import minilm_encoder, minilm_path, write_beir, write_code_search_set

from clipmag.errors import ConfigError
from text_retrieval.retrieval.mining import build_pool, mine_negatives
from text_retrieval.retrieval.negatives import MiningRules, select_negatives, summarize

IDS = list(range(20))
SCORES = [1.0 - 0.05 * i for i in IDS]  # candidate i scores 1 - 0.05 i: ranks are ids


def _select(positives=(), positive_score=1.0, key="q", **rules):
    return select_negatives(IDS, SCORES, set(positives), positive_score, MiningRules(**rules), key)


# ---- the rules -------------------------------------------------------------------------------------
def test_the_rank_window_counts_from_zero_and_excludes_rank_max():
    assert _select(num_negatives=5, rank_min=5, rank_max=10).ids == [5, 6, 7, 8, 9]
    assert _select(num_negatives=3, rank_min=0, rank_max=3).ids == [0, 1, 2]


def test_every_known_positive_is_excluded_and_ranks_count_the_other_candidates():
    chosen = _select(positives={0, 3, 19}, num_negatives=3, rank_min=1, rank_max=10)
    assert chosen.ids == [2, 4, 5]  # non-positive ranking 1, 2, 4, 5, ...: rank 1 is candidate 2
    assert chosen.skipped["positive"] == 3


def test_an_absolute_margin_skips_candidates_above_positive_minus_margin():
    chosen = _select(positive_score=0.8, absolute_margin=0.12, num_negatives=2)
    assert chosen.ids == [7, 8] and chosen.skipped["margin"] == 7  # 1.0 .. 0.70 lie above 0.68


def test_a_relative_margin_is_a_fraction_of_the_positive_magnitude_whatever_its_sign():
    assert _select(positive_score=0.8, relative_margin=0.3, num_negatives=1).ids == [9]  # 0.55 <= 0.56
    scores = [-1.0, -1.5, -2.0, -2.1, -2.3]
    below = select_negatives(range(5), scores, set(), -2.0, MiningRules(num_negatives=1, relative_margin=0.1))
    assert below.ids == [4] and below.skipped["margin"] == 4  # threshold -2.0 - 0.2 = -2.2, not -1.8


def test_both_margins_apply_and_the_stricter_one_decides():
    rules = {"positive_score": 0.8, "num_negatives": 1}
    assert _select(absolute_margin=0.05, relative_margin=0.3, **rules).ids == [9]  # 0.56 below 0.75
    assert _select(absolute_margin=0.32, relative_margin=0.01, **rules).ids == [11]  # 0.48 below 0.792


def test_the_score_cap_skips_likely_false_negatives():
    chosen = _select(max_score=0.72, num_negatives=2, rank_min=2, rank_max=20)
    assert chosen.ids == [6, 7] and chosen.skipped["max_score"] == 4  # ranks 2-5 score 0.90 .. 0.75


def test_margins_and_cap_apply_inside_the_window():
    chosen = _select(max_score=0.72, num_negatives=3, rank_min=5, rank_max=8)
    assert chosen.ids == [6, 7] and chosen.skipped["max_score"] == 1


def test_sentence_transformers_semantics_count_the_window_after_margins_and_cap():
    """A cap removing ranks 0-5 (1.0 .. 0.75): clipmag's window 5-8 holds ranks 5, 6, 7, of which
    the cap leaves 6 and 7; sentence-transformers' skips the first 5 survivors (6-10) instead."""
    settings = {"max_score": 0.72, "num_negatives": 3, "rank_min": 5, "rank_max": 8}
    assert _select(**settings).ids == [6, 7]
    theirs = _select(semantics="sentence-transformers", **settings)
    assert theirs.ids == [11, 12, 13] and theirs.skipped["max_score"] == 6
    rules = {"relative_margin": 0.12, "semantics": "sentence-transformers", "num_negatives": 2}
    positives = _select(positives={0, 1}, **rules)  # the margin (0.88) then removes candidate 2 (0.90)
    assert positives.ids == [3, 4] and positives.skipped == {"positive": 2, "margin": 1, "max_score": 0}


def test_a_query_with_fewer_candidates_keeps_what_it_has_and_is_counted():
    rules = MiningRules(num_negatives=3, rank_min=0, rank_max=10)
    full = select_negatives(IDS, SCORES, set(), 1.0, rules)
    short = select_negatives([0, 1, 2], [0.9, 0.8, 0.7], {0, 1}, 1.0, rules)
    none = select_negatives([0], [0.9], {0}, 1.0, rules)
    assert short.ids == [2] and none.ids == []
    summary = summarize([full, short, none], [1.0, 1.0, 1.0], rules)
    assert summary["queries_fewer_than_k"] == 2 and summary["queries_without_negatives"] == 1
    assert summary["negatives"] == 4 and summary["skipped"]["positive"] == 3


def test_random_sampling_is_seeded_by_seed_and_query_and_stays_in_the_window_in_rank_order():
    draws = {
        (seed, key): _select(key=key, sampling="random", seed=seed, num_negatives=4, rank_min=3, rank_max=15).ids
        for seed in (0, 1)
        for key in ("a", "b", "c")
    }
    for ids in draws.values():
        assert len(set(ids)) == 4 and ids == sorted(ids) and all(3 <= i < 15 for i in ids)
    again = _select(key="a", sampling="random", seed=0, num_negatives=4, rank_min=3, rank_max=15).ids
    assert again == draws[(0, "a")]
    assert len(set(map(tuple, draws.values()))) > 3  # seeds and queries change the draw
    assert _select(sampling="random", num_negatives=3, rank_min=0, rank_max=3).ids == [0, 1, 2]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"num_negatives": 5, "rank_min": 8, "rank_max": 10}, "cannot fit ranks 8-10"),
        ({"rank_min": 10, "rank_max": 10}, "rank_min < rank_max"),
        ({"absolute_margin": -0.1}, "absolute_margin must be >= 0"),
        ({"num_negatives": 0}, "at least 1"),
    ],
)
def test_impossible_rules_are_refused(rules, message):
    with pytest.raises(ValueError, match=message):
        MiningRules(**rules)


def test_the_pool_keys_documents_by_text_and_gathers_every_positive_of_a_query():
    samples = [
        {"query": "q1", "positive": "a"},
        {"query": "q2", "positive": "b"},
        {"query": "q1", "positive": "c"},
        {"query": "q3", "positive": "a"},
    ]
    pool = build_pool(samples, corpus=["x", "b", "y"])
    assert pool.corpus == ["x", "b", "y", "a", "c"] and pool.queries == ["q1", "q2", "q3"]
    assert pool.positives == [{3, 4}, {1}, {3}] and pool.sample_query == [0, 1, 0, 2]


# ---- mining under a head ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def code_pairs(tmp_path_factory):
    """48 (docstring summary, code) pairs of the stdlib logging package."""
    return write_code_search_set(tmp_path_factory.mktemp("code"))


def test_mined_negatives_are_the_heads_own_ranking_without_the_positives(code_pairs, tmp_path):
    """Under qnorm the hard documents are those of highest |d| cos: recomputed here by brute force
    from raw embeddings, which one corpus cache serves to every head."""
    samples = code_pairs[:16] + [{"query": code_pairs[0]["query"], "positive": code_pairs[20]["positive"]}]
    rules = MiningRules(num_negatives=3, rank_min=2, rank_max=10)
    pool = build_pool(samples)
    raw = minilm_encoder(precision="fp32")
    q = torch.from_numpy(raw.encode(pool.queries, "query", show_progress=False))
    d = torch.from_numpy(raw.encode(pool.corpus, "document", show_progress=False))
    orders = {}
    for norm in ("cosine", "qnorm"):
        encoder = minilm_encoder(norm, precision="fp32")
        mined, summary = mine_negatives(encoder, samples, rules, cache_dir=str(tmp_path), show_progress=False)
        scores = encoder.head.score(q, d).numpy()
        orders[norm] = np.argsort(-scores, axis=1, kind="stable")
        for sample, row in zip(mined, pool.sample_query):
            ranking = [int(i) for i in orders[norm][row] if i not in pool.positives[row]]
            assert sample["negatives"] == [pool.corpus[i] for i in ranking[2:5]], norm
        first = [s for s in mined if s["query"] == code_pairs[0]["query"]]
        assert len(first) == 2 and first[0]["negatives"] == first[1]["negatives"]  # shared, both positives out
        assert not {code_pairs[0]["positive"], code_pairs[20]["positive"]} & set(first[0]["negatives"])
        assert summary["queries"] == 16 and summary["queries_fewer_than_k"] == 0
    assert len(list(tmp_path.iterdir())) == 1  # one cached corpus for both heads
    assert (orders["cosine"][:, 2:5] != orders["qnorm"][:, 2:5]).any()  # the heads disagree on what is hard


# ---- the command line ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def beir_train(tmp_path_factory, code_pairs):
    """A BEIR folder whose train split judges 24 of the pairs (query 0 judges two documents)."""
    corpus = [{"_id": f"d{i}", "title": "", "text": s["positive"]} for i, s in enumerate(code_pairs)]
    queries = [{"_id": f"q{i}", "text": s["query"]} for i, s in enumerate(code_pairs[:24])]
    qrels = [(f"q{i}", f"d{i}", 1) for i in range(24)] + [("q0", "d30", 1)]
    return write_beir(tmp_path_factory.mktemp("beir"), corpus, queries, qrels, split="train")


def _mine_args(data, out, *extra):
    return ["--model", minilm_path(), "--data", str(data), "--output", str(out), "--quiet", "--precision", "fp32",
            "--query-max-length", "32", "--document-max-length", "64", "--num-negatives", "2", *extra]  # fmt: skip


@pytest.mark.slow
def test_the_command_writes_shards_the_trainer_reads_with_hard_negatives(tmp_path, beir_train):
    from clipmag.config.build import build_config
    from clipmag.runtime import distributed as dist_utils
    from text_retrieval.config import TextConfig, resolve_text_config
    from text_retrieval.data.shards_cli import main as make_shards
    from text_retrieval.data.training.shards import load_shard, resolve_shards
    from text_retrieval.retrieval.mine_cli import main
    from text_retrieval.task import TextRetrievalTask

    out = tmp_path / "mined"
    corpus = str(beir_train / "corpus.jsonl")
    manifest = main(_mine_args(beir_train, out, "--corpus", corpus, "--rank-min", "1", "--samples-per-shard", "10"))
    assert sorted(p.name for p in out.iterdir()) == [".clipmag.lock", "manifest.json", "shard-000000.tar",
                                                      "shard-000001.tar", "shard-000002.tar", "sizes.json"]  # fmt: skip
    written = json.loads((out / "manifest.json").read_text())
    assert (
        written == manifest and written["head"] == {"name": "cosine"} and written["settings"]["rules"]["rank_min"] == 1
    )
    assert written["numerics"]["precision"] == "fp32" and written["numerics"]["autocast"] == "fp32"
    counts = written["counts"]
    assert counts["samples"] == 25 and counts["queries"] == 24 and counts["corpus_documents"] == 48
    assert counts["queries_fewer_than_k"] == 0 and counts["negatives"] == 48

    make_shards([str(tmp_path / "plain"), "--beir", str(beir_train)])  # same source, same seed
    mined = [s for p in resolve_shards(out) for s in load_shard(p)]
    plain = [s for p in resolve_shards(tmp_path / "plain") for s in load_shard(p)]
    assert [(s["query"], s["positive"]) for s in mined] == [(s["query"], s["positive"]) for s in plain]
    positives = {}
    for s in mined:
        positives.setdefault(s["query"], set()).add(s["positive"])
    assert all(len(s["negatives"]) == 2 and not positives[s["query"]] & set(s["negatives"]) for s in mined)

    overrides = [("model.name", minilm_path()), ("data.train", str(out)), ("data.hard_negatives", 2),
                 ("data.batch_size", 4), ("data.validation", []), ("data.test", []), ("model.query_max_length", 32),
                 ("model.document_max_length", 32)]  # fmt: skip
    cfg = resolve_text_config(build_config(TextConfig, None, overrides))
    task = TextRetrievalTask(cfg, dist_utils.init_distributed("cpu"))
    batch = next(task.train_batches(0))
    assert all(len(n) == 2 for n in batch["negatives"])
    loss = task.build_model()(batch)["loss"]
    loss.backward()
    assert math.isfinite(loss.item())


def test_an_existing_output_is_kept_unless_overwrite_and_only_mined_shards_are_replaced(tmp_path, code_pairs):
    from text_retrieval.retrieval.mine_cli import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(s) + "\n" for s in code_pairs[:12]), encoding="utf-8")
    out = tmp_path / "mined"
    first = main(_mine_args(pairs, out, "--norm", "dot"))
    assert first["head"] == {"name": "dot"} and first["counts"]["samples"] == 12
    with pytest.raises(ConfigError, match="already exists; pass --overwrite"):
        main(_mine_args(pairs, out))
    again = main(_mine_args(pairs, out, "--overwrite", "--sampling", "random", "--seed", "3"))
    assert again["settings"]["rules"]["sampling"] == "random" and again["seed"] == 3
    assert json.loads((out / "manifest.json").read_text())["seed"] == 3
    assert not list(tmp_path.glob(".mined.*"))  # no staging or old copy left beside it
    with pytest.raises(ConfigError, match=r"pairs.jsonl/\.mined\.partial: cannot write here"):  # before any work
        main(_mine_args(pairs, pairs / "mined"))
    with pytest.raises(FileNotFoundError, match="expected a pairs .jsonl file"):
        main(_mine_args(tmp_path / "absent", tmp_path / "failed"))
    assert not list(tmp_path.glob(".failed*")) and not (tmp_path / "failed").exists()  # a failed run leaves nothing
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"holds files that mining did not write \(notes.txt\)"):
        main(_mine_args(pairs, out, "--overwrite"))
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rank-min", "99", "--rank-max", "100"], "cannot fit ranks 99-100"),
        (["--relative-margin", "1.5"], "relative_margin"),
        (["--num-negatives", "0"], "num_negatives"),
        (["--sampling", "hardest"], "sampling"),
        (["--semantics", "faiss"], "semantics"),
        (["--negatives-from", "corpus"], "--negatives-from corpus needs --corpus"),
        (["--negatives-from", "training-judged", "--corpus", "c.jsonl"], "give one of the two"),
    ],
)
def test_bad_settings_fail_before_any_work(tmp_path, extra, message):
    from text_retrieval.retrieval.mine_cli import parse_args

    with pytest.raises(ConfigError, match=message):
        parse_args(["--model", "m", "--data", "d", "--output", str(tmp_path / "o"), *extra])


def test_bad_data_names_what_was_expected(tmp_path):
    from text_retrieval.retrieval.mining_sources import load_corpus, load_samples

    with pytest.raises(FileNotFoundError, match="expected a pairs .jsonl file, a folder of text shards"):
        load_samples(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="holds no corpus.jsonl"):
        load_corpus(str(tmp_path))


# ---- agreement with sentence-transformers ---------------------------------------------------------
@pytest.fixture(scope="module")
def st_model():
    sentence_transformers = pytest.importorskip("sentence_transformers")
    pytest.importorskip("datasets")
    return sentence_transformers.SentenceTransformer(minilm_path(), device="cpu")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ({"rank_min": 3, "rank_max": 12}, {"range_min": 3, "range_max": 12}),
        ({"rank_max": 48, "relative_margin": 0.05}, {"range_max": 48, "relative_margin": 0.05}),
        ({"rank_max": 48, "absolute_margin": 0.02, "max_score": 0.5}, {"range_max": 48, "absolute_margin": 0.02,
                                                                          "max_score": 0.5}),
    ],
)  # fmt: skip
def test_cosine_mining_matches_sentence_transformers(st_model, code_pairs, tmp_path_factory, ours, theirs):
    """Equivalent settings under cosine give the same negatives in the same order: both count ranks
    among the non-positive candidates. Margins and cap are compared over the whole corpus (48
    documents): sentence-transformers searches ``range_max`` + the most positives any query has,
    so a query with fewer positives sees deeper than ``range_max``, and it skips ``range_min`` of
    the candidates left after margins and cap (text_retrieval/retrieval/negatives.py)."""
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    cache = tmp_path_factory.getbasetemp() / "st-mining-cache"  # both sides encode once for all cases
    samples = code_pairs[:20] + [{"query": code_pairs[1]["query"], "positive": code_pairs[30]["positive"]}]
    extra = [s["positive"] for s in code_pairs[20:]]
    dataset = Dataset.from_dict({"query": [s["query"] for s in samples], "positive": [s["positive"] for s in samples]})
    found = mine_hard_negatives(
        dataset, st_model, corpus=extra, num_negatives=3, sampling_strategy="top", output_format="labeled-list",
        batch_size=16, verbose=False, cache_folder=str(cache / "st"), **theirs,
    )  # fmt: skip
    expected = {row["query"]: row["positive"][1:] for row in found}
    encoder = minilm_encoder("cosine", precision="fp32", query_max_length=256, document_max_length=256)
    rules = MiningRules(num_negatives=3, **ours)
    mined, summary = mine_negatives(encoder, samples, rules, extra, cache_dir=str(cache / "ours"), show_progress=False)
    ours_found = {s["query"]: s["negatives"] for s in mined if s["negatives"]}
    assert ours_found == expected and len(ours_found) == 20 - summary["queries_without_negatives"]


@pytest.mark.slow
def test_sentence_transformers_semantics_choose_what_mine_hard_negatives_chooses(st_model, code_pairs, tmp_path):
    """rank_min 10 with a relative margin: the case where the two ways of counting the window part.
    ``--semantics sentence-transformers`` chooses exactly what sentence-transformers chooses; the
    default chooses otherwise for some query (each query's own text is a corpus document here too)."""
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    samples = code_pairs[:24]
    extra = [s["positive"] for s in code_pairs[24:]] + [s["query"] for s in code_pairs[:4]]
    dataset = Dataset.from_dict({"query": [s["query"] for s in samples], "positive": [s["positive"] for s in samples]})
    found = mine_hard_negatives(
        dataset, st_model, corpus=extra, num_negatives=3, range_min=10, range_max=30, relative_margin=0.05,
        sampling_strategy="top", output_format="labeled-list", batch_size=16, verbose=False,
    )  # fmt: skip
    expected = {row["query"]: row["positive"][1:] for row in found}
    encoder = minilm_encoder("cosine", precision="fp32", query_max_length=256, document_max_length=256)
    chosen = {}
    for semantics in ("sentence-transformers", "clipmag"):
        rules = MiningRules(num_negatives=3, rank_min=10, rank_max=30, relative_margin=0.05, semantics=semantics)
        mined, _ = mine_negatives(
            encoder, samples, rules, extra, cache_dir=str(tmp_path / "cache"), show_progress=False
        )
        chosen[semantics] = {s["query"]: s["negatives"] for s in mined if s["negatives"]}
    assert chosen["sentence-transformers"] == expected and len(expected) >= 20  # a query left without any
    assert chosen["clipmag"] != expected


def test_the_manifest_says_where_negatives_came_from(tmp_path, beir_train):
    from text_retrieval.retrieval.mine_cli import main

    judged = main(_mine_args(beir_train, tmp_path / "judged", "--split", "train", "--rank-max", "10"))
    corpus = main(_mine_args(beir_train, tmp_path / "all", "--corpus", str(beir_train), "--rank-max", "10"))
    assert judged["negatives_from"] == "training-judged" and corpus["negatives_from"] == "corpus"
    assert judged["counts"]["corpus_documents"] < corpus["counts"]["corpus_documents"]


@pytest.mark.slow
def test_two_torchrun_ranks_share_the_corpus_encoding_and_write_what_one_process_writes(tmp_path, code_pairs):
    from conftest import REPO, run_python

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(s) + "\n" for s in code_pairs[:24]), encoding="utf-8")
    outputs = {}
    for nproc in (1, 2):
        outputs[nproc] = tmp_path / f"mined-{nproc}"
        args = _mine_args(pairs, outputs[nproc], "--chunk-size", "8", "--batch-size", "8")
        run_python(REPO / "scripts" / "mine_negatives.py", args, nproc=nproc)
    for name in ("shard-000000.tar", "sizes.json"):
        assert (outputs[1] / name).read_bytes() == (outputs[2] / name).read_bytes()
    one, two = (json.loads((outputs[n] / "manifest.json").read_text())["counts"] for n in (1, 2))
    assert one["negatives"] == two["negatives"] == 48
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mined-1", "mined-2", "pairs.jsonl"]  # no cache left
