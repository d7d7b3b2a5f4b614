"""A served index ranks as ``eval_text.py`` does: every head, every store, real faiss, LanceDB and Qdrant.

Two tiny exports of one random BERT (a qnorm one, scored under cosine, dot, qnorm and dnorm with
``--norm``, and a learnable one with gammas away from the corners) index the full SciFact corpus
(5,183 documents, its 300 test queries); ``eval_text.py --index`` through each store must give
``eval_text.py``'s own exact nDCG@10 (overall and per query), its top-10 in order and its top-100
scores (slow: nine builds and 36 evaluations; the 48-document code search set checks the same
for one head in the fast suite). Qdrant's local mode commits every point to sqlite on its own
(qdrant-client 1.20.0, ``local/persistence.py``), one disk sync each, so these indexes are built
on tmpfs where the machine has one. Then the refusals, on the code search set: a metric that
cannot rank as the head does, an index file built under another metric, another model's queries,
another corpus.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import faiss
import numpy as np
import pytest
from text_fixtures import REPO, SCIFACT, require, write_code_search_set, write_tiny_bert

from clipmag.errors import UserError
from clipmag.scoring.heads import build_head
from text_retrieval.evaluation.cli import main as eval_main
from text_retrieval.evaluation.metrics import read_trec_run
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.serving.cli import main as index_main
from text_retrieval.serving.lance_store import check_distance_convention
from text_retrieval.serving.qdrant_store import build_qdrant
from text_retrieval.serving.served import ServedIndex

HEADS = {  # head -> (export, --norm)
    "cosine": ("qnorm", "cosine"),
    "dot": ("qnorm", "dot"),
    "qnorm": ("qnorm", None),
    "dnorm": ("qnorm", "dnorm"),
    "learnable": ("learnable", None),
}
COMMON = ["--precision", "fp32", "--quiet"]
STORES = ("faiss", "lancedb", "qdrant")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving")
    write_code_search_set(root)
    bert = write_tiny_bert(root / "bert")
    for name, settings in {"qnorm": {}, "learnable": {"gq": 0.3, "gd": 0.7}}.items():
        head = build_head(name, **settings)
        TextEncoder.from_pretrained(str(bert), head=head, max_length=64, precision="fp32").save_pretrained(root / name)
    return root


def _build(root, output, export="qnorm", norm=None, *extra, corpus=None):
    norm_flags = ["--norm", norm] if norm else []
    argv = ["build", "--model", str(root / export), "--corpus", str(corpus or root / "beir"), "--output", str(output)]
    return index_main([*argv, *norm_flags, *extra, *COMMON])["manifest"]


def _evaluate(root, output, export="qnorm", norm=None, *extra, data=None):
    norm_flags = ["--norm", norm] if norm else []
    argv = ["--model", str(root / export), "--data", str(data or root / "beir"), "--output", str(output)]
    (record,) = eval_main([*argv, "--top-k", "100", *norm_flags, *extra, *COMMON])
    return record, read_trec_run(record["run_file"])


def _assert_same(exact, served, relative=1e-6):
    """Same nDCG@10 (overall and per query), the same top-10 in order and the same top-100 scores.

    Two documents whose exact scores agree to ``relative`` are a tie that float rounding may order
    either way (a random tiny BERT gives many): there a swap is allowed, and a document of the exact
    top-100 may give its place at rank 100 to one scored the same."""
    (exact_record, exact_run), (served_record, served_run) = exact, served
    assert served_record["metrics"]["NDCG@10"] == pytest.approx(exact_record["metrics"]["NDCG@10"], abs=1e-6)
    for qid, hits in exact_run.items():
        assert served_record["per_query"][qid]["NDCG@10"] == pytest.approx(
            exact_record["per_query"][qid]["NDCG@10"], abs=1e-6
        )
        ours = served_run[qid]
        ranked, served_ranked = sorted(hits, key=lambda d: -hits[d]), sorted(ours, key=lambda d: -ours[d])
        for theirs, mine in zip(ranked[:10], served_ranked[:10]):
            assert mine == theirs or ours[mine] == pytest.approx(hits[theirs], rel=relative, abs=relative), qid
        last = ours[served_ranked[-1]]
        for doc, score in hits.items():
            assert ours.get(doc, last) == pytest.approx(score, rel=relative, abs=relative), (qid, doc)


@pytest.fixture(scope="module")
def scifact(root):
    """SciFact's corpus and test queries, with one corpus cache the builds and evaluations share."""
    return require(SCIFACT), ["--cache-dir", str(root / "cache")]


def _served_as_exact(root, folder, index, export, norm, *build, data=None, cache=(), relative=1e-6):
    """Build ``index`` in every store and check each against eval_text.py's exact search; the manifest."""
    manifest = _build(root, index, export, norm, *build, *cache, corpus=data)
    exact = _evaluate(root, folder / "exact", export, norm, *cache, data=data)
    for store in STORES:
        served = _evaluate(root, folder / store, export, norm, "--index", str(index), "--index-store", store, data=data)
        assert served[0]["search"]["store"] == store and served[0]["search"]["method"] == "served index"
        _assert_same(exact, served, relative)
    return manifest, exact[0]


def test_every_store_serves_the_code_search_set_as_eval_text(root, tmp_path, index_folder):
    manifest, exact = _served_as_exact(root, tmp_path, index_folder, "qnorm", None)
    assert set(manifest.stores) == set(STORES) and exact["num_documents"] == 48


@pytest.mark.slow
@pytest.mark.parametrize("head", HEADS)
def test_flat_index_in_every_store_ranks_and_scores_as_eval_text(root, scifact, tmp_path, index_folder, head):
    export, norm = HEADS[head]
    data, cache = scifact
    manifest, exact = _served_as_exact(root, tmp_path, index_folder, export, norm, data=data, cache=cache)
    assert exact["num_documents"] == 5183 and exact["num_queries"] == 300
    assert manifest.record.head_name == head and set(manifest.stores) == set(STORES)
    assert manifest.stores["qdrant"]["distance"] == "Dot" and manifest.stores["lancedb"]["distance_type"] == "dot"
    assert manifest.code["commit"] and manifest.encoder["weights"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("norm", "metric", "mips"),
    [("dnorm", "cosine", False), ("dnorm", "l2", False), ("dot", "l2", True), ("qnorm", "cosine", True)],
)
def test_cosine_and_l2_rank_as_the_head_where_every_document_has_one_norm(
    root, scifact, tmp_path, index_folder, norm, metric, mips
):
    extra = ["--metric", metric, *(["--mips"] if mips else [])]
    data, cache = scifact
    # distances turned back into inner products: float32 rounding
    manifest, _ = _served_as_exact(
        root, tmp_path, index_folder, "qnorm", norm, *extra, data=data, cache=cache, relative=1e-5
    )
    assert manifest.stores["qdrant"]["distance"] == {"cosine": "Cosine", "l2": "Euclid"}[metric]


def test_a_metric_that_drops_the_norm_is_refused_in_one_line_before_anything_is_written(root, tmp_path):
    output = tmp_path / "index"
    argv = ["build", "--model", str(root / "qnorm"), "--corpus", str(root / "beir"), "--output", str(output)]
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "index.py"), *argv, "--metric", "cosine", "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: metric cosine discards the document norm that the qnorm head ranks by (gd = 0): "
        "use --metric ip, or add --mips to bring every document to one norm first"
    )
    assert not output.exists() and not output.with_name("index.partial").exists()


@pytest.fixture(scope="module")
def qnorm_index(root):
    _build(root, root / "qnorm-index")
    return root / "qnorm-index"


def test_an_index_file_built_under_another_metric_is_refused(root, qnorm_index, tmp_path):
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for name in ("manifest.json", "ids.json", "norms.npy"):
        (tampered / name).write_bytes((qnorm_index / name).read_bytes())
    original = faiss.read_index(str(qnorm_index / "index.faiss"))
    l2 = faiss.IndexFlatL2(original.d)
    l2.add(original.reconstruct_n(0, original.ntotal))
    faiss.write_index(l2, str(tampered / "index.faiss"))
    with pytest.raises(ValueError, match=r"its faiss metric is L2, but the manifest says ip") as err:
        _evaluate(root, tmp_path / "out", "qnorm", None, "--index", str(tampered))
    assert "\n" not in str(err.value)


def test_another_model_or_head_is_refused_by_the_manifest(root, qnorm_index, tmp_path):
    other = write_tiny_bert(tmp_path / "other", intermediate_size=48)
    with pytest.raises(ValueError, match=r"cannot serve queries encoded by .*other: weights '[0-9a-f]+' here") as err:
        _evaluate(root, tmp_path / "a", str(other), "qnorm", "--index", str(qnorm_index))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"head \{'name': 'cosine'\} here, \{'name': 'qnorm'\} in the index"):
        _evaluate(root, tmp_path / "b", "qnorm", "cosine", "--index", str(qnorm_index))
    with pytest.raises(ValueError, match=r"cannot serve queries encoded by .*other: weights"):
        index_main(["query", "--index", str(qnorm_index), "--text", "x", "--model", str(other), *COMMON])


def test_an_index_of_another_corpus_is_refused(root, qnorm_index, tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    lines = (root / "beir" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (beir / "corpus.jsonl").write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    for name in ("queries.jsonl", "qrels/test.tsv"):
        (beir / name).write_bytes((root / "beir" / name).read_bytes())
    argv = ["--model", str(root / "qnorm"), "--data", str(beir), "--output", str(tmp_path / "o"), "--index"]
    with pytest.raises(ValueError, match=r"holds the corpus 'beir' \(48 documents.*not 'beir''s \(47 documents"):
        eval_main([*argv, str(qnorm_index), *COMMON])


def test_query_command_prints_each_querys_top_documents_from_the_database(root, qnorm_index, tmp_path):
    script = str(REPO / "scripts" / "index.py")
    argv = [
        "query",
        "--index",
        str(qnorm_index),
        "--text",
        "log a message",
        "--top-k",
        "3",
        "--store",
        "lancedb",
        "--precision",
        "fp32",
    ]
    done = subprocess.run([sys.executable, script, *argv, "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(text) for text in done.stdout.splitlines()]
    assert line["query_id"] == "0" and line["query"] == "log a message" and len(line["hits"]) == 3
    served = ServedIndex(qnorm_index, "faiss")
    encoder = TextEncoder.from_pretrained(str(root / "qnorm"), precision="fp32")
    scores, positions = served.search(encoder.encode(["log a message"], "query", show_progress=False), 3)
    assert [h["id"] for h in line["hits"]] == [served.ids[p] for p in positions[0]]
    np.testing.assert_allclose([h["score"] for h in line["hits"]], scores[0], rtol=1e-6)


@pytest.mark.parametrize("distance_type", ["dot", "cosine", "l2"])
def test_lancedbs_distance_convention_is_probed_and_a_change_fails_loudly(distance_type):
    check_distance_convention(distance_type)  # this LanceDB: 1 - q.d, 1 - cos, squared distance
    other = {"dot": "l2", "cosine": "dot", "l2": "cosine"}[distance_type]
    with pytest.raises(UserError, match=rf"lancedb [0-9.]+: distance_type '{distance_type}' reports values") as err:
        check_distance_convention(distance_type, searched_as=other)  # what a LanceDB reporting another value gives
    assert "\n" not in str(err.value) and "pip install lancedb==" in str(err.value)


def test_a_qdrant_collection_under_another_distance_is_refused(root, qnorm_index, tmp_path):
    tampered = tmp_path / "tampered"
    shutil.copytree(qnorm_index, tampered)
    shutil.rmtree(tampered / "qdrant")
    original = ServedIndex(qnorm_index, "faiss").store.index
    build_qdrant(iter([original.reconstruct_n(0, original.ntotal)]), tampered, original.d, "cosine")
    with pytest.raises(ValueError, match=r"its Qdrant distance is Cosine, but the manifest says ip \(Dot\)"):
        ServedIndex(tampered, "qdrant")


def test_two_builds_into_one_folder_at_once_leave_one_whole_index(root, tmp_path):
    """Started together, one build writes the index and the other is refused in one line: it finds
    the first holding the staging folder's lock, or, started after the first finished, the index
    there without --overwrite. No staging folder is left."""
    from conftest import start_script

    output = tmp_path / "index"
    argv = ["build", "--model", str(root / "qnorm"), "--corpus", str(root / "beir"), "--output", str(output), *COMMON]
    builds = [start_script(REPO / "scripts" / "index.py", [*argv, "--stores", "faiss"]) for _ in range(2)]
    outcomes = sorted((build.wait(timeout=400), build.stderr.read()) for build in builds)
    assert [code for code, _ in outcomes] == [0, 2], outcomes
    refusal = outcomes[1][1].strip().splitlines()[-1]
    assert refusal.startswith("error: ") and (
        "is in use by another index build" in refusal or f"{output} exists; pass --overwrite" in refusal
    ), refusal
    ServedIndex(output)  # the index that was written opens whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]
