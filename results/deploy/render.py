"""Render a deploy measurement (results/deploy/*.json) as its docs/deploy.md table.

    python results/deploy/render.py compression                        # print the table
    python results/deploy/render.py hybrid --write docs/deploy.md      # replace its block in the page

The table names the commit and the command that measured it. ``--write`` replaces what lies
between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->`` in the page (the placeholder before a
measurement), and refuses a page without both markers.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from clipmag.results.provenance import describe_code

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("compression", "hybrid")


def _source(record: dict[str, Any]) -> str:
    """Which commit and command measured the rows, and on what."""
    prov, numerics = record["provenance"], record.get("numerics", {})
    command = " ".join(["python", *prov["command"]["argv"]])
    machine = f"{numerics.get('device', '?')}, {numerics.get('torch_threads', '?')} threads, {numerics.get('autocast')}"
    return f"Measured with `{command}` ({describe_code(prov['code'])}, {prov['recorded']}; {machine})."


def _groups(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, dict[str, Any]]]:
    """(dataset, model, head) -> {setting: row}, by data set, then model, then head (each in the order it came)."""
    groups: dict[tuple, dict[str, dict[str, Any]]] = {}
    for row in rows:
        key = row.get("compression", row.get("fusion"))
        groups.setdefault((row["dataset"], row["model"], row["head"]), {})[key] = row
    first = [{value: i for i, value in enumerate(dict.fromkeys(key[part] for key in groups))} for part in range(3)]
    return dict(sorted(groups.items(), key=lambda item: tuple(first[p][item[0][p]] for p in range(3))))


def compression_table(record: dict[str, Any]) -> str:
    rows = record["rows"]
    levels = list(dict.fromkeys(r["compression"].removesuffix("+norm") for r in rows if r["compression"] != "none"))
    header = ["dataset", "model", "head", "fp32", *(f"{level} plain / +norm" for level in levels)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (dataset, model, head), found in _groups(rows).items():
        cells = [f"{found['none']['ndcg10']:.4f}"]
        cells += [f"{found[level]['ndcg10']:.4f} / {found[level + '+norm']['ndcg10']:.4f}" for level in levels]
        lines.append(f"| {dataset} | {model} | {head} | " + " | ".join(cells) + " |")
    memory = ["", "Memory per vector (bytes), plain / +norm:", "", "| model | fp32 | " + " | ".join(levels) + " |"]
    memory.append("|" + "---|" * (len(levels) + 2))
    for model in dict.fromkeys(r["model"] for r in rows):
        found = {r["compression"]: r["bytes_per_vector"] for r in rows if r["model"] == model}
        cells = [f"{found[level]:g} / {found[level + '+norm']:g}" for level in levels]
        memory.append(f"| {model} | {found['none']:g} | " + " | ".join(cells) + " |")
    return "\n".join(["nDCG@10 (exact search, top 100):", "", *lines, *memory, "", _source(record)])


def hybrid_table(record: dict[str, Any]) -> str:
    def cell(row: dict[str, Any]) -> str:
        if "ndcg10" in row:
            return f"{row['ndcg10']:.4f}"
        return f"{row['accuracy@5']:.3f} / {row['accuracy@20']:.3f}"

    rows = record["rows"]
    header = ["dataset", "model", "head", "dense alone", "+ BM25 rrf", "+ BM25 minmax", "+ BM25 zscore"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    alone = []
    for (dataset, model, head), found in _groups(rows).items():
        if "bm25" in found:
            alone.append(f"{dataset} {cell(found['bm25'])}")
            continue
        cells = [cell(found[f]) for f in ("none", "rrf", "minmax", "zscore")]
        lines.append(f"| {dataset} | {model} | {head} | " + " | ".join(cells) + " |")
    legend = "nDCG@10 on the BEIR sets; accuracy@5 / accuracy@20 (an answer in the top k) on the RAG passages."
    return "\n".join([legend, "", *lines, "", f"BM25 alone: {'; '.join(alone)}.", "", _source(record)])


RENDERERS = {"compression": compression_table, "hybrid": hybrid_table}


def write_block(page: Path, name: str, table: str) -> None:
    """Replace the ``name`` block of ``page`` with ``table``."""
    text = page.read_text(encoding="utf-8")
    pattern = re.compile(rf"(<!-- table:{name} -->\n).*?(\n<!-- /table:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"error: {page}: no <!-- table:{name} --> ... <!-- /table:{name} --> block to replace")
    page.write_text(pattern.sub(lambda m: m.group(1) + table + m.group(2), text), encoding="utf-8")
    print(f"{page}: the {name} table replaced")


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", choices=TABLES)
    parser.add_argument("--json", default=None, help="the measurement (default results/deploy/TABLE.json)")
    parser.add_argument("--write", default=None, help="a page whose TABLE block the table replaces")
    args = parser.parse_args(argv)
    source = Path(args.json) if args.json else ROOT / "results" / "deploy" / f"{args.table}.json"
    if not source.is_file():
        raise SystemExit(f"error: {source}: not measured yet (run results/deploy/measure_{args.table}.py)")
    record = json.loads(source.read_text(encoding="utf-8"))
    if record.get("table") != args.table:
        raise SystemExit(f"error: {source}: holds the {record.get('table')!r} table, not {args.table!r}")
    table = RENDERERS[args.table](record)
    if args.write:
        write_block(Path(args.write), args.table, table)
    else:
        sys.stdout.write(table + "\n")
    return table


if __name__ == "__main__":
    main()
