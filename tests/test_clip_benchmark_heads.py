"""``clipmag-eval-clip-benchmark --head``: CLIP-benchmark's zero-shot classification and retrieval on
the offline digits sets (its own ``wds`` reader), scored with the model's head.

Under ``--head cosine`` the numbers are plain CLIP-benchmark's (its command line with our loader and
its own scoring, on the same export); under ``--head model`` retrieval is ``image_text.evaluation.retrieval``'s
on the same split, and classification is the argmax of the head over class embeddings (mean prompt
direction times mean prompt norm) in the model's trained roles, where qnorm with the image as the
query re-weights classes by their text norms and dnorm does not. A one-side head ranks the side it
normalises as cosine does, so one retrieval direction is cosine's under ``--head model`` too.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from clip_benchmark.datasets.builder import build_dataset
from clip_fixtures import write_digit_shards
from conftest import REPO, run_python

from clipmag.errors import ConfigError
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from image_text.data.reading import read_eval_set
from image_text.evaluation import benchmark
from image_text.evaluation.retrieval import recall_hits, retrieval_metrics
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.loading import load_clipmag

TRAIN = [
    "model.name=clipmag-micro",
    "data.bundled.train=256",
    "data.bundled.validation=16",
    "data.bundled.test=16",
    "data.bundled.per_class=1",
    "train.steps=40",
    "data.batch_size=32",
    "train.save_every=0",
    "train.eval_every=0",
    "train.tensorboard=false",
    "train.progress=false",
    "train.device=cpu",
    "train.precision=fp32",
]
pytestmark = pytest.mark.slow
TASKS = {
    "retrieval": ("zeroshot_retrieval", ["--recall_k", "1", "5", "10"]),
    "classification": ("zeroshot_classification", []),
}


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    return write_digit_shards(tmp_path_factory.mktemp("digits"), 16, 8, 30, per_class=4, shard_size=50)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    """A micro CLIP trained briefly with the image as the query under qnorm (so its text norms carry
    something), and its weights under other head records: the head changes, the towers do not."""
    root = tmp_path_factory.mktemp("exports")
    run = root / "run"
    args = [*TRAIN, "--objective", "i2t", "--norm", "qnorm", f"train.output_dir={run}"]
    run_python(REPO / "scripts" / "train_clip.py", args, timeout=300)
    first = shutil.copytree(run / "export", root / "qnorm-image")
    found = {"qnorm-image": first}
    for name, side in (("dnorm", "image"), ("qnorm", "text")):
        folder = root / f"{name}-{side}"
        shutil.copytree(first, folder)
        record = HeadRecord.read(first)
        record.head, record.query_side = {"name": name}, side
        record.write(folder)
        found[f"{name}-{side}"] = folder
    return found


def cb_args(digits: Path, export: Path, task: str, out: Path) -> list[str]:
    name, extra = TASKS[task]
    args = ["eval", "--model_type", "clipmag", "--model", "micro", "--pretrained", str(export)]
    args += ["--dataset", f"wds/digits_{task}", "--dataset_root", f"{digits}/wds/{{dataset}}", "--task", name]
    return args + ["--output", str(out), "--num_workers", "0", "--no_amp", "--batch_size", "16", "--quiet", *extra]


def ours(digits: Path, export: Path, task: str, tmp_path: Path, *head: str) -> dict:
    out = tmp_path / f"ours_{task}_{export.name}_{'_'.join(head)}.json"
    benchmark.run_cli([*cb_args(digits, export, task, out), *head])
    return json.loads(out.read_text())


def plain(digits: Path, export: Path, task: str, tmp_path: Path, monkeypatch) -> dict:
    """CLIP-benchmark's own command line and scoring, with only our loader registered."""
    from clip_benchmark import cli

    benchmark.register()
    out = tmp_path / f"plain_{task}.json"
    monkeypatch.setattr(sys, "argv", ["clip_benchmark", *cb_args(digits, export, task, out)])
    cli.main()
    return json.loads(out.read_text())


@pytest.mark.parametrize("task", ["retrieval", "classification"])
def test_head_cosine_is_plain_clip_benchmark(digits, exports, tmp_path, monkeypatch, task):
    export = exports["qnorm-image"]
    reference = plain(digits, export, task, tmp_path, monkeypatch)
    scored = ours(digits, export, task, tmp_path, "--head", "cosine")
    assert {k: v for k, v in scored.items() if k != "metrics"} == {k: v for k, v in reference.items() if k != "metrics"}
    assert scored["metrics"].pop("head") == "cosine (the model's head: qnorm)"
    assert scored["metrics"].keys() == reference["metrics"].keys()
    for key, value in reference["metrics"].items():
        assert abs(scored["metrics"][key] - value) <= 1e-6 or (value != value and scored["metrics"][key] != value)


@pytest.mark.parametrize("export_name", ["qnorm-image", "qnorm-text"])
def test_head_model_retrieval_is_clipmag_evaluate_on_the_same_split(digits, exports, tmp_path, export_name):
    export = exports[export_name]
    scored = ours(digits, export, "retrieval", tmp_path)["metrics"]  # --head model is the default
    assert scored["head"] == f"qnorm (query side {export_name.split('-')[1]})"
    model, preprocess, tokenizer = load_clipmag(export)
    test = read_eval_set(str(digits / "test"), preprocess, tokenizer, "test split")
    with torch.no_grad():
        expected = retrieval_metrics(
            model, model.encode_image(test.images), model.encode_text(test.tokens), test.image_of_text
        )
    assert expected["n_images"] == 30
    for k in (1, 5, 10):
        assert abs(scored[f"text_retrieval_recall@{k}"] - expected[f"i2t_r{k}_head"]) <= 1e-6
        assert abs(scored[f"image_retrieval_recall@{k}"] - expected[f"t2i_r{k}_head"]) <= 1e-6
    # the equality tells the head from cosine only where their numbers differ: in the direction that reads
    # norms (I->T with the image as the query); the other ranks as cosine does, for any weights (below)
    reads_norms, as_cosine = ("i2t", "t2i") if export_name == "qnorm-image" else ("t2i", "i2t")
    assert any(expected[f"{reads_norms}_r{k}_head"] != expected[f"{reads_norms}_r{k}_cosine"] for k in (1, 5, 10))
    assert all(expected[f"{as_cosine}_r{k}_head"] == expected[f"{as_cosine}_r{k}_cosine"] for k in (1, 5, 10))


def random_features(
    seed: int, split: Path, head: str, query_side: str
) -> tuple[ClipMagModel, torch.Tensor, torch.Tensor, torch.Tensor]:
    """An untrained ``clipmag-micro`` under ``head`` in ``query_side``, its raw image and text features of
    ``split`` and the image of each text."""
    torch.manual_seed(seed)
    clip, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    model = ClipMagModel(clip, build_head(head), InfoNCE(scale=20.0), query_side, "clipmag-micro").eval()
    data = read_eval_set(str(split), preprocess, tokenizer, "test split")
    with torch.no_grad():
        return model, model.encode_image(data.images), model.encode_text(data.tokens), data.image_of_text


def ranks_alike(own: torch.Tensor, cosine: torch.Tensor, dim: int, tolerance: float = 1e-5) -> bool:
    """Whether ``own`` ranks along ``dim`` as ``cosine`` does: cosine's scores, read in own's order, never
    rise by more than float rounding. (Comparing the two argsorts instead fails on near-ties, whose order
    one rounding step can swap, and the matmul kernels round differently on different CPUs.)"""
    in_own_order = cosine.gather(dim, own.argsort(dim, descending=True))
    return bool((in_own_order.diff(dim=dim) <= tolerance).all())


@pytest.mark.parametrize(
    ("head", "query_side"), [("qnorm", "image"), ("qnorm", "text"), ("dnorm", "image"), ("dnorm", "text")]
)
def test_a_one_side_head_ranks_the_side_it_normalises_as_cosine_does(digits, head, query_side):
    """A one-side head scores cos(i, t) times the norm of one side only (qnorm: the document's, dnorm:
    the query's). Ranking the side it normalises for one item of the other multiplies every candidate by
    that item's norm, so that direction's ranking is cosine's for any weights: with qnorm and the image
    as the query, CLIP-benchmark's image retrieval (T->I) is the same under --head model and cosine.
    The other direction reads norms, but an untrained model's images point almost one way, so there
    every image ranks the same long texts first, and two random models can print the same R@5 on a
    small split while hitting different queries: a tie of aggregates, not one model scored twice."""
    normalised_dim = 0 if (head == "qnorm") == (query_side == "image") else 1  # 0 ranks images, 1 texts
    hits, orders = [], []
    for seed in (0, 1):
        model, images, texts, owner = random_features(seed, digits / "test", head, query_side)
        own, cosine = model.similarity(images, texts), model.similarity(images, texts, build_head("cosine"))
        ranked = {dim: (own.argsort(dim, descending=True), cosine.argsort(dim, descending=True)) for dim in (0, 1)}
        assert ranks_alike(own, cosine, normalised_dim)
        assert not ranks_alike(own, cosine, 1 - normalised_dim)
        assert F.cosine_similarity(images[:, None], images[None], dim=-1).mean() > 0.9  # images point one way
        hits.append(recall_hits(own, owner, (1, 5, 10)))
        orders.append(ranked[1 - normalised_dim][0])
    assert not torch.equal(*orders)
    assert any(not torch.equal(hits[0][name], hits[1][name]) for name in hits[0])


def written_out_predictions(export: Path, digits: Path) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Each image's class under cosine, qnorm and dnorm with the image as the query, computed here from
    the raw features: |t_c|^(1-gd) cos(i, t_c) for the class embedding t_c of mean direction x mean norm."""
    model, preprocess, tokenizer = load_clipmag(export)
    data = build_dataset("wds/digits_classification", root=f"{digits}/wds/digits_classification", transform=preprocess)
    images, labels = zip(*data)
    with torch.no_grad():
        features = model.encode_image(torch.stack(images))
        prompts = [[t.format(c=c) for t in data.templates] for c in data.classes]
        raw = torch.stack([model.encode_text(tokenizer(p)) for p in prompts])  # [classes, templates, D]
    direction = F.normalize(F.normalize(raw, dim=-1).mean(dim=1), dim=-1)
    norm = raw.norm(dim=-1).mean(dim=1)
    cosine = F.normalize(features, dim=-1) @ direction.t()
    return {"cosine": cosine.argmax(1), "qnorm": (cosine * norm).argmax(1), "dnorm": cosine.argmax(1)}, torch.tensor(
        labels
    )


def test_head_model_classification_reads_class_norms_only_where_the_head_keeps_them(digits, exports, tmp_path):
    predictions, labels = written_out_predictions(exports["qnorm-image"], digits)
    assert (predictions["qnorm"] != predictions["cosine"]).any()  # the class norms move some images
    for name in ("cosine", "qnorm", "dnorm"):
        export = exports["qnorm-image" if name == "cosine" else f"{name}-image"]
        head = ("--head", "cosine") if name == "cosine" else ()
        scored = ours(digits, export, "classification", tmp_path, *head)["metrics"]
        expected = float((predictions[name] == labels).float().mean())
        assert abs(scored["acc1"] - expected) <= 1e-6, name
        assert scored["head"].startswith(name)


def test_norm_scores_with_the_head_it_names_over_the_models_own(digits, exports, tmp_path):
    """``--norm NAME`` (or ``head.name=NAME``), as in every clipmag tool, scores the qnorm export with
    head NAME in its trained roles: what an export recording NAME scores."""
    predictions, labels = written_out_predictions(exports["qnorm-image"], digits)
    for name, words in (("dnorm", ["--norm", "dnorm"]), ("cosine", ["head.name=cosine"]), ("qnorm", ["--norm=qnorm"])):
        scored = ours(digits, exports["qnorm-image"], "classification", tmp_path, *words)["metrics"]
        assert abs(scored["acc1"] - float((predictions[name] == labels).float().mean())) <= 1e-6, name
        assert scored["head"].startswith(name)


def test_a_bad_head_flag_is_one_line():
    with pytest.raises(ConfigError, match="--head takes model or cosine, got 'dnorm'"):
        benchmark.split_head_flag(["eval", "--head", "dnorm"])
    assert benchmark.split_head_flag(["eval", "--head=cosine", "--no_amp"]) == ("cosine", ["eval", "--no_amp"])
