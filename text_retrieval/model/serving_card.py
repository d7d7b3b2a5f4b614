"""The model card's serving section: what to store for this head and which metric to pick in each engine.

A head ``s(q, d) = (q / |q|^gq) . (d / |d|^gd)`` is served by storing ``d / |d|^gd`` - what the
export's ``encode_document`` returns - and searching with the inner product of ``q / |q|^gq``
(``encode_query``). Where the documents keep a norm (``gd < 1``: dot, qnorm, most learnable heads)
only an inner-product setting ranks as the model was trained; a cosine collection normalises the
documents and throws the norm away. Where they are unit length (``gd = 1``: cosine, dnorm) cosine
and inner product give the same ranking. The settings were checked against each engine's own
documentation (``docs/deploy.md`` cites them); ``ANN_CAVEAT`` carries clipmag's measured recall
(``docs/benchmarks.md``, approximate search per head).
"""

from __future__ import annotations

from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head

__all__ = ["ENGINE_SETTINGS", "ANN_CAVEAT", "serving_section"]

# engine -> (the inner-product setting, the cosine setting); the names are each engine's own.
ENGINE_SETTINGS = {
    "faiss": (
        "`faiss.METRIC_INNER_PRODUCT` (`IndexFlatIP`, `IndexHNSWFlat(d, M, faiss.METRIC_INNER_PRODUCT)`)",
        "`faiss.normalize_L2` on both sides, then `METRIC_INNER_PRODUCT`",
    ),
    "Qdrant": ('`"distance": "Dot"`', '`"distance": "Cosine"` (normalises vectors on upload)'),
    "Milvus": ('`metric_type="IP"`', '`metric_type="COSINE"`'),
    "pgvector": (
        "`<#>` (negative inner product), index opclass `vector_ip_ops`",
        "`<=>` (cosine distance), index opclass `vector_cosine_ops`",
    ),
    "LanceDB": (
        '`distance_type("dot")` (an index: `create_index("vector", config=IvfFlat(distance_type="dot"))` '
        "or `HnswFlat`, not the default product-quantised IVF_PQ)",
        '`distance_type("cosine")`',
    ),
    "Elasticsearch": (
        '`"similarity": "max_inner_product"` (8.11+)',
        '`"similarity": "cosine"`, or `"dot_product"` with unit-length documents and queries',
    ),
    "OpenSearch": ('`"space_type": "innerproduct"`', '`"space_type": "cosinesimil"`'),
    "Vespa": (
        "`distance-metric: dotproduct`",
        "`distance-metric: angular` (`prenormalized-angular` only with unit documents and unit queries)",
    ),
}

ANN_CAVEAT = (
    "Approximate indexes lose some of the exact ranking. clipmag measured recall@10 against exact search "
    "(faiss, all-MiniLM-L6-v2 and a dot-head export, SciFact, Cranfield and 4,387 RAG passages): HNSW "
    "with the inner product kept >= 0.997 under every head; IVF at its default probe count kept 0.90-0.92 "
    "under cosine and 0.02-0.07 less under dot and qnorm; the MIPS reduction to one norm lowered HNSW "
    "(to 0.976 at worst). Raise `efSearch` / `nprobe` for a head whose documents keep their norm."
)


def _side(gamma: float, side: str, letter: str) -> str:
    if gamma == 0.0:
        return f"raw {side} vectors, as the encoder outputs them (never normalised)"
    if gamma == 1.0:
        return f"unit-length {side} vectors ({letter} / |{letter}|)"
    return f"{letter} / |{letter}|^{gamma:.4g}"


def serving_section(record: HeadRecord) -> str:
    """The card's ``## Serving`` section for the head in ``record`` (Markdown, ending in a newline)."""
    head = build_head(record)
    gq, gd = head.gammas()
    keeps_norm = gd != 1.0
    column = "setting (inner product: the only one that keeps the ranking)" if keeps_norm else "setting"
    rows = [f"| {engine} | {ip} |" for engine, (ip, _) in ENGINE_SETTINGS.items()]
    if not keeps_norm:
        rows = [f"| {engine} | {ip}, or {cos} |" for engine, (ip, cos) in ENGINE_SETTINGS.items()]
    if keeps_norm:
        warning = (
            f"This head ranks by the document norm (gd = {gd:.4g}): a cosine collection, or any store that "
            "normalises vectors on upload, throws that norm away and ranks as the cosine head would, and "
            "Elasticsearch's `dot_product` refuses vectors that are not unit length. Use an inner-product setting."
        )
    elif gq == 1.0:
        warning = "Both sides are unit length: cosine and inner product give the same scores."
    else:
        factor = "|q|" if gq == 0.0 else f"|q|^{1 - gq:.4g}"
        warning = (
            "The documents are unit length, so cosine and inner product rank alike; the inner product's "
            f"scores carry the factor {factor} and cosine's do not, which matters only where scores are "
            "compared across queries (thresholds, score fusion without per-query normalisation)."
        )
    return "\n".join(
        [
            "",
            "## Serving in a vector database",
            "",
            f"Store the documents as {_side(gd, 'document', 'd')} and send the queries as {_side(gq, 'query', 'q')}: "
            "what a dense export's `encode_document` and `encode_query` return. Their inner product is the "
            "model's score.",
            "",
            warning,
            "",
            f"| engine | {column} |",
            "|---|---|",
            *rows,
            "",
            ANN_CAVEAT,
            "`python scripts/index.py build --model PATH --corpus BEIR_FOLDER --output INDEX` (clipmag) writes a faiss "
            "index and a LanceDB table laid out this way; `scripts/eval_text.py --index INDEX` checks them against "
            "exact search.",
            "",
        ]
    )
