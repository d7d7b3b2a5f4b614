"""A small BRIGHT laid out like the hub repository (``<config>/<task>-00000-of-00001.parquet``).

Three tasks with real-looking text: biology and pony have long documents (whole pages, each the
concatenation of its short chunks, as in BRIGHT), leetcode has none and uses ``excluded_ids``. The
``gpt4_reason`` config repeats the examples with an LLM-style reasoning as the query.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytrec_eval

PAGES = {
    "biology": {
        "bio-photo": [
            "Photosynthesis in chloroplasts turns sunlight, water and carbon dioxide into glucose and oxygen.",
            "Chlorophyll absorbs red and blue light, which drives the light reactions of photosynthesis.",
        ],
        "bio-mito": ["Mitochondria produce ATP through cellular respiration and oxidative phosphorylation."],
        "bio-dna": [
            "DNA stores genetic information as a sequence of nucleotide bases.",
            "During replication, DNA polymerase copies each strand of the double helix before a cell divides.",
        ],
        "bio-frog": ["Frogs are amphibians that lay their eggs in ponds."],
    },
    "pony": {
        "pony-actors": ["Actors in Pony run behaviours asynchronously and never share mutable state."],
        "pony-caps": ["Reference capabilities such as iso, val and ref make data races impossible in Pony."],
        "pony-generics": ["Generic classes in Pony take type parameters in square brackets."],
    },
    "leetcode": {
        "two-sum": ["Use a hash map from value to index to find two numbers that add up to a target."],
        "binary-search": ["Binary search halves a sorted array at each step to find a value in logarithmic time."],
        "merge-intervals": ["Sort the intervals by start, then merge each one that overlaps the previous one."],
    },
}
# task -> (id, query, gold short ids, gold long ids, excluded ids)
EXAMPLES = {
    "biology": [
        ("0", "How do plants turn sunlight into sugar?", ["bio-photo-0", "bio-photo-1"], ["bio-photo"], ["N/A"]),
        ("1", "Which part of the cell makes ATP?", ["bio-mito-0"], ["bio-mito"], []),
        ("2", "How is DNA copied before a cell divides?", ["bio-dna-1"], ["bio-dna"], ["N/A"]),
    ],
    "pony": [
        ("0", "How do I run code concurrently without locks?", ["pony-actors-0"], ["pony-actors"], ["N/A"]),
        ("1", "Why may two actors not share a ref object?", ["pony-caps-0"], ["pony-caps"], ["N/A"]),
    ],
    "leetcode": [
        ("0", "Merge all overlapping meeting times.", ["merge-intervals-0"], [], ["binary-search-0"]),
        ("1", "Find a value in a sorted array quickly.", ["binary-search-0"], [], ["two-sum-0"]),
    ],
}
LONG_TASKS = ("biology", "pony")
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def example_rows(task: str, config: str = "examples") -> list[dict]:
    """The rows of an examples (or reasoning) parquet file, with the hub's field names."""
    rows = []
    for qid, query, gold, gold_long, excluded in EXAMPLES[task]:
        if config != "examples":
            query = f"Reasoning: the question asks '{query}' The answer names the mechanism involved."
        rows.append(
            {
                "query": query,
                "reasoning": "",
                "id": qid,
                "excluded_ids": excluded,
                "gold_ids_long": gold_long,
                "gold_ids": gold,
                "gold_answer": "",
            }
        )
    return rows


def write_hub_tree(root: Path) -> Path:
    """Write examples, gpt4_reason, documents and (biology, pony) long_documents parquet files."""
    for task, pages in PAGES.items():
        name = f"{task}-00000-of-00001.parquet"
        for config in ("examples", "gpt4_reason"):
            _write(root / config / name, example_rows(task, config))
        chunks = [
            {"id": f"{page}-{i}", "content": text} for page, texts in pages.items() for i, text in enumerate(texts)
        ]
        _write(root / "documents" / name, chunks)
        if task in LONG_TASKS:
            _write(root / "long_documents" / name, [{"id": p, "content": " ".join(t)} for p, t in pages.items()])
    return root


def download_all_settings(hub: Path, root: Path) -> Path:
    """Standard, long and reasoning downloads into one root, as a user runs them one after another."""
    from text_retrieval.data.fetch import download_bright

    tasks = tuple(PAGES)
    download_bright(root, tasks=tasks, revision=REVISION, snapshot=hub)
    download_bright(root, tasks=LONG_TASKS, long_documents=True, revision=REVISION, snapshot=hub)
    download_bright(root, tasks=tasks, reasoning=["gpt4_reason"], revision=REVISION, snapshot=hub)
    return root


def official_scores(rows: list[dict], run: dict[str, dict[str, float]], long: bool) -> dict[str, float]:
    """The official run.py rule straight from the hub rows: every gold id (present in the corpus or
    not) with gain 1, pytrec_eval, mean over the queries it evaluates."""
    key = "gold_ids_long" if long else "gold_ids"
    qrels = {row["id"]: {gold: 1 for gold in row[key]} for row in rows}
    measures = {"ndcg_cut.10": "ndcg_cut_10", "recall.1": "recall_1", "recall.100": "recall_100"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    means = {name: sum(q[name] for q in per_query.values()) / len(per_query) for name in measures.values()}
    return {"NDCG@10": means["ndcg_cut_10"], "Recall@1": means["recall_1"], "Recall@100": means["recall_100"]}
