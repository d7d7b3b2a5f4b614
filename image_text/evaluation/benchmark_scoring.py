"""CLIP-benchmark's zero-shot tasks scored with a model's head (``clipmag-eval-clip-benchmark --head``, ``--norm``).

CLIP-benchmark's ``cli.run`` calls ``zeroshot_classification.evaluate`` and
``zeroshot_retrieval.evaluate`` on the modules it imported. ``head_aware(cli, head)`` puts the two
functions here in their place while its command line runs, so everything else is CLIP-benchmark's
own: the argument parsing, the dataset builders (the ``wds/`` sets the shard builder writes, and
every other), class names and templates, the data loaders, the output file names and the JSON
dump. The metrics are its functions too (``accuracy``, ``average_precision_per_class``,
``recall_at_k`` with ``batchify``, scikit-learn's balanced accuracy), applied to the head's scores.

Two things differ from CLIP-benchmark, and only in what the scores are:

* Features stay raw and the scores are ``ClipMagModel.similarity``: the head chosen (the model's,
  or the one ``--norm`` names) in the roles the model was trained with (``query_side``). Retrieval ranks the one
  [images x texts] matrix along rows (its text retrieval, our I->T) and columns (its image
  retrieval, our T->I), as :mod:`image_text.evaluation.retrieval` does.
* A class is a text: classification ranks class embeddings for each image exactly as I->T
  retrieval ranks captions, and a class embedding is its prompts' mean direction (CLIP-benchmark's
  classifier) times their mean norm (``image_text.evaluation.zero_shot.class_embeddings``).

Under cosine both are CLIP-benchmark's numbers (to float rounding; exactly its arithmetic in fp32,
``--no_amp``). The metrics gain one entry, ``head``, naming the scoring. A model without a head
record (``--model_type open_clip``) is scored with cosine, the head it was trained with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from clip_benchmark.metrics.zeroshot_classification import accuracy, average_precision_per_class
from clip_benchmark.metrics.zeroshot_retrieval import batchify, dataloader_with_indices, recall_at_k
from sklearn.metrics import balanced_accuracy_score

from clipmag.scoring.head_config import OWN_HEAD
from clipmag.scoring.heads import build_head
from clipmag.storage.safe_load import load_weights_only

from .zero_shot import class_embeddings

Scorer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def scorer(model: Any, head: str) -> tuple[Scorer, str]:
    """``(image features, text features) -> [N_images, N_texts]`` scores and what they are: ``head``
    is ``model`` (the model's own head) or the name of a head to score with instead."""
    similarity = getattr(model, "similarity", None)
    if similarity is None:  # open_clip's own model: trained with cosine, the image side as query
        chosen = build_head("cosine" if head == OWN_HEAD else head)
        return chosen.score, f"{chosen.name} (the model has no head record)"
    if head != OWN_HEAD:
        return partial(similarity, head=build_head(head)), f"{head} (the model's head: {model.head.name})"
    return similarity, f"{model.head.name} (query side {model.query_side})"


def _autocast(device: str, amp: bool) -> contextlib.AbstractContextManager:
    return torch.autocast(torch.device(device).type, enabled=amp)


@torch.no_grad()
def _classifier(
    model: Any, tokenizer: Any, classnames: Sequence[str], templates: Any, device: str, amp: bool
) -> torch.Tensor:
    """Class embeddings [C, D] from CLIP-benchmark's templates: one list for every class (``{c}`` marks
    the name) or a dict of each class's own prompts, as its ``zero_shot_classifier`` reads them."""
    rows = []
    for name in classnames:
        texts = templates[name] if isinstance(templates, dict) else [t.format(c=name) for t in templates]
        with _autocast(device, amp):
            features = model.encode_text(tokenizer(texts).to(device))
        rows.append(class_embeddings(features.float()))
    return torch.stack(rows)


def _classification_metrics(logits: torch.Tensor, target: torch.Tensor, n_classes: int) -> dict[str, float]:
    """CLIP-benchmark's metrics of its ``zeroshot_classification.evaluate``, on these scores."""
    if target.ndim == 2:  # several labels per image
        return {"mean_average_precision": average_precision_per_class(logits, target).mean().item()}
    acc1, acc5 = accuracy(logits, target, topk=(1, 5)) if n_classes >= 5 else (*accuracy(logits, target), float("nan"))
    recall = balanced_accuracy_score(target, logits.argmax(dim=1))
    return {"acc1": acc1, "acc5": acc5, "mean_per_class_recall": recall}


@torch.no_grad()
def classify(
    model: Any,
    dataloader: Any,
    tokenizer: Any,
    classnames: Sequence[str],
    templates: Any,
    device: str,
    amp: bool = True,
    verbose: bool = False,
    save_clf: str | None = None,
    load_clfs: Sequence[str] = (),
    *,
    head: str = OWN_HEAD,
) -> dict[str, Any]:
    """CLIP-benchmark's ``zeroshot_classification.evaluate``, scored with ``head``. ``save_clf`` writes
    the class embeddings as it lays its classifier out ([D, C]); ``load_clfs`` averages such files
    (read as tensors only)."""
    score, described = scorer(model, head)
    if load_clfs:
        classes = sum(load_weights_only(path) for path in load_clfs).t() / len(load_clfs)
    else:
        classes = _classifier(model, tokenizer, classnames, templates, device, amp)
    if save_clf is not None:
        torch.save(classes.t().contiguous(), save_clf)
    logits, target = [], []
    for images, labels in dataloader:
        with _autocast(device, amp):
            features = model.encode_image(images.to(device))
        logits.append(score(features.float(), classes.to(features.device)).float().cpu())
        target.append(labels.cpu())
    if verbose:
        print(f"zero-shot classification scored with {described}")
    return {**_classification_metrics(torch.cat(logits), torch.cat(target), len(classnames)), "head": described}


@torch.no_grad()
def retrieve(
    model: Any,
    dataloader: Any,
    tokenizer: Any,
    device: str,
    amp: bool = True,
    recall_k_list: Sequence[int] = (5,),
    *,
    head: str = OWN_HEAD,
) -> dict[str, Any]:
    """CLIP-benchmark's ``zeroshot_retrieval.evaluate``, scored with ``head``: an image is found by any
    of its captions (its text retrieval), a caption finds its image (its image retrieval)."""
    score, described = scorer(model, head)
    images, texts, owner = [], [], []
    for batch_images, batch_texts, rows in dataloader_with_indices(dataloader):
        tokens = tokenizer([t for captions in batch_texts for t in captions]).to(device)
        owner += [row for row, captions in zip(rows.tolist(), batch_texts) for _ in captions]
        with _autocast(device, amp):
            images.append(model.encode_image(batch_images.to(device)).float().cpu())
            texts.append(model.encode_text(tokens).float().cpu())
    scores = score(torch.cat(images), torch.cat(texts)).t()  # [texts, images], as CLIP-benchmark lays them out
    positive = torch.zeros_like(scores, dtype=torch.bool)
    positive[torch.arange(len(scores)), owner] = True
    batch = len(images[0])
    metrics: dict[str, Any] = {}
    for k in recall_k_list:
        found = batchify(recall_at_k, scores, positive, batch, device, k=k) > 0
        metrics[f"image_retrieval_recall@{k}"] = found.float().mean().item()
        found = batchify(recall_at_k, scores.T, positive.T, batch, device, k=k) > 0
        metrics[f"text_retrieval_recall@{k}"] = found.float().mean().item()
    return {**metrics, "head": described}


@contextlib.contextmanager
def head_aware(cli: ModuleType, head: str) -> Iterator[None]:
    """While it lasts, CLIP-benchmark's command line (module ``cli``) scores its zero-shot tasks with ``head``."""
    saved = cli.zeroshot_classification, cli.zeroshot_retrieval
    cli.zeroshot_classification = SimpleNamespace(evaluate=partial(classify, head=head))
    cli.zeroshot_retrieval = SimpleNamespace(evaluate=partial(retrieve, head=head))
    try:
        yield
    finally:
        cli.zeroshot_classification, cli.zeroshot_retrieval = saved
