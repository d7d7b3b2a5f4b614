"""The text export's model card (``README.md``): the head, how to score with it in
sentence-transformers, and, once the run has tested the export, its training data and test metrics.

``python -m text_retrieval.model.card RUN_DIR`` rewrites a training run's card from its folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.scoring.head_record import CARD_FILE, HEAD_FILE, HeadRecord
from clipmag.scoring.heads import build_head
from text_retrieval.model.serving_card import serving_section
from text_retrieval.model.st_export import SPARSE_POOLINGS, plain_similarity

__all__ = ["model_card", "write_model_card", "describe_run"]

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
    "`trust_remote_code=True`, which sentence-transformers asks for any module class outside its own package. "
    "`text_retrieval.st_modules.NormPower` is imported from the installed clipmag, never from this folder, but "
    "the flag trusts the whole folder: a module type `name.Class` would run `name.py` from it and `auto_map` in "
    "`config.json` its modeling code. Before loading a copy you did not make, check that it holds no `.py` file "
    "and that `modules.json` and `1_Router/router_config.json` name only `sentence_transformers.*` types and "
    "`text_retrieval.st_modules.NormPower`."
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
    sides_by_hand = sparse and not plain_similarity(gq, gd)
    model = record.model_name or "unknown"
    hub_name = model != "unknown" and not Path(model).is_absolute()
    random = record.random_init_seed  # a from-scratch start: the named model gave only its architecture
    settings = {k: v for k, v in record.to_dict().items() if k not in ("head", "model_name", "random_init_seed")}
    settings.update(query_prefix=record.query_prefix or "", document_prefix=record.document_prefix or "")
    for side in ("query", "document"):  # a model clipmag did not train has no training lengths
        settings[f"training_{side}_max_length"] = settings[f"training_{side}_max_length"] or "not recorded"
    return _CARD.format(
        **settings,
        head=record.head_name,
        gq=gq,
        gd=gd,
        model=model if random is None else f"{model}'s architecture, random weights (seed {random})",
        base_model=f"base_model: {model}\n" if hub_name and random is None else "",
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
    """``python -m text_retrieval.model.card RUN_DIR``: the run's export gets its full model card."""
    from clipmag.config.command_line import parse_cli, require_words

    cmd = parse_cli(DescribeCommand, argv, {}, description=describe_run.__doc__ or "", positional="run_dir")
    require_words(cmd, ("run_dir",))
    print(describe_run(cmd.run_dir))


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
