"""The sentence-transformers side of a text export: the head as an asymmetric pipeline, and a model card.

Every head scores ``s(q, d) = (q / |q|^gq) . (d / |d|^gd)``, so a sentence-transformers model
reproduces it exactly when ``encode_query`` ends in the query-side transform, ``encode_document``
in the document-side transform, and ``similarity`` is a dot product. The pipeline is built from
sentence-transformers' own module classes and written by its own ``save_pretrained``:

* equal exponents need no routing: ``[Transformer, Pooling]`` with ``similarity_fn_name`` ``cosine``
  (g = 1, embeddings stay raw) or ``dot`` (g = 0); a learnable head with equal exponents strictly
  between adds ``NormPower(g)``;
* unequal exponents (qnorm, dnorm, learnable) use a ``Router`` after the Transformer: query route
  ``[Pooling, transform(gq)]``, document route ``[Pooling, transform(gd)]`` (one Pooling, saved
  once), where transform(1) is ``Normalize``, transform(0) nothing, anything between ``NormPower``.

The fixed heads thus load with sentence-transformers alone; only a learnable head needs clipmag
(``text_retrieval.st_modules``, loaded with ``trust_remote_code=True``). Prefixes become the
``query`` / ``document`` prompts and the record's inference lengths (for a trained export, the
lengths its run's test encoded at) the Transformer's ``query_length`` / ``document_length``. Plain
``encode()`` takes the document route: the Router's default route, the ``document`` prompt as the
default prompt, and the document length as ``max_seq_length``. The model card gives the inference
and the training lengths.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.scoring.head_record import CARD_FILE, HEAD_FILE, HeadRecord
from clipmag.scoring.heads import build_head
from text_retrieval.model.serving_card import serving_section

logger = logging.getLogger("clipmag")

__all__ = ["save_sentence_transformers", "model_card", "write_model_card", "describe_run", "ST_POOLING"]

ST_POOLING = {"mean": "mean", "cls": "cls", "last": "lasttoken"}
SPARSE_POOLINGS = frozenset({"splade"})  # exported as a SparseEncoder
_ST_CONFIG = "sentence_bert_config.json"
_STALE = ("1_Pooling", "1_Router", "1_SpladePooling")  # module folders an earlier export of another head may have left


def _require_sentence_transformers() -> None:
    """sentence-transformers with ``Router`` and per-task Transformer lengths (6.x), else a clear error."""
    import inspect

    import sentence_transformers
    from sentence_transformers.base.modules import Transformer

    if "query_length" not in inspect.signature(Transformer.__init__).parameters:
        raise ImportError(
            f"the sentence-transformers export needs sentence-transformers >= 6.2 (Router and per-side max "
            f"lengths); installed: {sentence_transformers.__version__}"
        )


def _side_modules(gamma: float) -> list[Any]:
    from sentence_transformers.base.modules import Normalize

    from text_retrieval.st_modules import NormPower

    if gamma == 0.0:
        return []
    return [Normalize()] if gamma == 1.0 else [NormPower(gamma)]


def _plain_similarity(gq: float, gd: float) -> bool:
    """Whether a plain similarity function scores the head exactly: cosine (1, 1) or dot (0, 0)."""
    return gq == gd and gq in (0.0, 1.0)


def _sparse_pipeline(transformer: Any, gq: float, gd: float, directory: Path) -> tuple[list[Any], str]:
    """SPLADE as sentence-transformers' ``SparseEncoder``: ``[Transformer(fill-mask), SpladePooling]``.

    Its similarity is the dot product (the head SPLADE is trained with) or cosine; any other head
    needs per-side scaling that sentence-transformers' sparse pipeline does not do, so the user must
    apply it (the warning and the model card say how)."""
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    if not _plain_similarity(gq, gd):
        logger.warning(
            "%s: sentence-transformers' SparseEncoder scores SPLADE vectors with dot or cosine only; this head "
            "needs the query divided by |q|^%g and the document by |d|^%g before the dot product "
            "(or load it with clipmag's TextEncoder, which applies the head)",
            directory,
            gq,
            gd,
        )
    return [transformer, SpladePooling(pooling_strategy="max", activation_function="relu")], (
        "cosine" if gq == gd == 1.0 else "dot"
    )


def _pipeline(directory: Path, record: HeadRecord, dim: int) -> tuple[list[Any], str]:
    """The modules after the HF model folder in ``directory``, and the similarity function name."""
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    sparse = record.pooling in SPARSE_POOLINGS
    transformer = Transformer(
        str(directory),
        query_length=record.query_max_length,
        document_length=record.document_max_length,
        **({"transformer_task": "fill-mask"} if sparse else {}),
    )
    if sparse:
        return _sparse_pipeline(transformer, *build_head(record).gammas(), directory)
    pooling = Pooling(dim, ST_POOLING[record.pooling or "mean"], include_prompt=True)
    gq, gd = build_head(record).gammas()
    if _plain_similarity(gq, gd):
        return [transformer, pooling], "cosine" if gq == 1.0 else "dot"
    if not {gq, gd} <= {0.0, 1.0}:
        logger.warning(
            "%s: the learned exponents need clipmag's NormPower module; sentence-transformers loads this export "
            "with clipmag installed and trust_remote_code=True",
            directory,
        )
    if gq == gd:
        return [transformer, pooling, *_side_modules(gq)], "dot"
    router = Router.for_query_document(
        query_modules=[pooling, *_side_modules(gq)], document_modules=[pooling, *_side_modules(gd)]
    )
    return [transformer, router], "dot"


def save_sentence_transformers(directory: str | Path, record: HeadRecord, dim: int) -> None:
    """Write the sentence-transformers files for the HF model and tokenizer already in ``directory``.

    sentence-transformers' Transformer module loads the folder (so its files are the ones its own
    ``save_pretrained`` writes; the weights are written back unchanged), the head becomes the
    pipeline in the module docstring, and the model card (``README.md``) describes it.
    """
    _require_sentence_transformers()
    from sentence_transformers import SentenceTransformer, SparseEncoder

    directory = Path(directory)
    for stale in _STALE:
        shutil.rmtree(directory / stale, ignore_errors=True)
    modules, similarity = _pipeline(directory, record, dim)
    prompts = {"query": record.query_prefix or "", "document": record.document_prefix or ""}
    model_class = SparseEncoder if record.pooling in SPARSE_POOLINGS else SentenceTransformer
    model = model_class(
        modules=modules,
        device="cpu",
        similarity_fn_name=similarity,
        prompts=prompts,
        default_prompt_name="document" if prompts["document"] else None,
    )
    model.save_pretrained(str(directory), create_model_card=False)
    if record.document_max_length:  # plain encode(): the document length (read at load as max_seq_length)
        config_path = directory / _ST_CONFIG
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["max_seq_length"] = int(record.document_max_length)
        config_path.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
    write_model_card(directory, record)


_CARD = """---
library_name: sentence-transformers
pipeline_tag: sentence-similarity
tags:
- sentence-transformers
- clipmag
- head-{head}
{base_model}---

# clipmag text encoder, `{head}` head

A dense retriever whose similarity head decides where embeddings are normalised:
s(q, d) = (q / |q|^gq) . (d / |d|^gd) with **gq = {gq:.6g}, gd = {gd:.6g}** (clipmag's `{head}`).

| setting | value |
|---|---|
| base model | {model} |
| pooling | {pooling} |
| query prefix / document prefix | {query_prefix!r} / {document_prefix!r} |
| max tokens at inference, query / document | {query_max_length} / {document_max_length} |
| max tokens in training, query / document | {training_query_max_length} / {training_document_max_length} |
| training loss | InfoNCE, direction {loss_direction}, scale {scale} |
| training data | {data} |

## Scoring

```python
from sentence_transformers import {model_class}

model = {model_class}("PATH_OR_REPO"{trust})
queries = model.encode_query(["how do I sort a list"])
documents = model.encode_document(["sorted(xs) returns a new sorted list"])
scores = model.similarity(queries, documents)  # {exactness}
```

{routes} and `similarity` is `{similarity}`. Plain `encode()` follows the document route. {loading}
Queries and documents are cut at the inference lengths above: for a model clipmag trained, the
lengths its run was tested at, so these scores reproduce its results. To encode at others, set
`model[0].query_length` / `model[0].document_length`.

In clipmag, `TextEncoder.from_pretrained(PATH)` restores the head from `{head_file}`.

## Results

{results}
"""
_LOAD_FIXED = "Loading needs only sentence-transformers (>= 6.2)."
_LOAD_SPARSE_SIDES = (
    "SPLADE term weights load as a `SparseEncoder`, whose similarity is dot or cosine only: for this head "
    "divide each query vector by |q|^gq and each document vector by |d|^gd before the dot product "
    "(qnorm: normalise the queries; dnorm: the documents), or load with clipmag's `TextEncoder`, which "
    "applies the head."
)
_LOAD_LEARNABLE = (
    "The learnable head's transform is clipmag's `NormPower` module: loading needs clipmag installed and "
    "`trust_remote_code=True`."
)


def _card_results(results: Mapping[str, Any] | None) -> str:
    """A table of the test metrics in ``results.json``, or where to find them."""
    rows = []
    for dataset, values in ((results or {}).get("metrics") or {}).items():
        numbers = {k: v for k, v in values.items() if isinstance(v, float) and not k.startswith(("num_", "top_"))}
        rows.append(f"| {dataset} | " + ", ".join(f"{k} {v:.4f}" for k, v in numbers.items()) + " |")
    if not rows:
        return "Recorded in the run's `results.json` (written after the export is tested)."
    run = (results or {}).get("run", {})
    summary = f"{run.get('steps', '?')} steps, seed {run.get('seed', '?')}, objective {run.get('objective', '?')}."
    return "\n".join([summary, "", "| test set | metrics |", "|---|---|", *rows])


def model_card(record: HeadRecord, results: Mapping[str, Any] | None = None, data: Sequence[str] = ()) -> str:
    """The export's README.md: the head, how to score with it, and (when known) training data and metrics.

    ``results`` is the run's ``results.json`` (test metrics, steps, seed); ``data`` the training
    data it names. Without them the card says where they are recorded.
    """
    gq, gd = build_head(record).gammas()
    sparse = record.pooling in SPARSE_POOLINGS
    learnable = not sparse and not {gq, gd} <= {0.0, 1.0}
    sides_by_hand = sparse and not _plain_similarity(gq, gd)
    model = record.model_name or "unknown"
    hub_name = model != "unknown" and not Path(model).is_absolute()
    settings = {k: v for k, v in record.to_dict().items() if k not in ("head", "model_name")}
    settings.update(query_prefix=record.query_prefix or "", document_prefix=record.document_prefix or "")
    for side in ("query", "document"):  # a model clipmag did not train has no training lengths
        settings[f"training_{side}_max_length"] = settings[f"training_{side}_max_length"] or "not recorded"
    return _CARD.format(
        **settings,
        head=record.head_name,
        gq=gq,
        gd=gd,
        model=model,
        base_model=f"base_model: {model}\n" if hub_name else "",
        data=", ".join(data) if data else "see the run folder (config.yaml)",
        trust=", trust_remote_code=True" if learnable else "",
        similarity="cosine" if gq == gd == 1.0 else "dot",
        loading=_LOAD_SPARSE_SIDES if sides_by_hand else _LOAD_LEARNABLE if learnable else _LOAD_FIXED,
        model_class="SparseEncoder" if sparse else "SentenceTransformer",
        routes="`encode_query` and `encode_document` return raw SPLADE term weights"
        if sides_by_hand
        else "`encode_query` and `encode_document` apply each side's part of the head",
        exactness="raw dot products: apply the head as below" if sides_by_hand else "the head's scores, exactly",
        head_file=HEAD_FILE,
        results=_card_results(results),
    )


def write_model_card(
    directory: str | Path, record: HeadRecord, results: Mapping[str, Any] | None = None, data: Sequence[str] = ()
) -> Path:
    """Write ``model_card(...)`` as ``directory/README.md``."""
    path = Path(directory) / CARD_FILE
    path.write_text(model_card(record, results, data) + serving_section(record), encoding="utf-8")
    return path


def describe_run(run_dir: str | Path) -> Path:
    """Rewrite a training run's ``export/README.md`` with its training data (``config.yaml``) and test
    metrics (``results.json``, written after the export was tested, so unknown when it was saved)."""
    from clipmag.config.build import load_yaml
    from clipmag.results.record import read_results

    run = Path(run_dir)
    results = read_results(run / "results.json")
    train = load_yaml(run / "config.yaml").get("data", {}).get("train", [])
    data = [str(train)] if isinstance(train, str) else [str(t) for t in train]
    return write_model_card(run / "export", HeadRecord.read(run / "export"), results, data)


@dataclass
class DescribeCommand:
    """RUN_DIR: a text training run folder (with results.json, config.yaml, export/)."""

    run_dir: str = ""


def main(argv: Sequence[str]) -> None:
    """``python -m text_retrieval.model.st_export RUN_DIR``: the run's export gets its full model card."""
    from clipmag.config.command_line import parse_cli, require_words

    cmd = parse_cli(DescribeCommand, argv, {}, description=describe_run.__doc__ or "", positional="run_dir")
    require_words(cmd, ("run_dir",))
    print(describe_run(cmd.run_dir))


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
