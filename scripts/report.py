"""Collect a sweep's runs into report.md with tables (markdown + CSV) and figures.

    python scripts/report.py runs/demo
"""

import argparse

from clipmag.entry import run_entry_point
from clipmag.report import build_report


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", help="a sweep's output_dir")
    parser.add_argument("--title", default="clipmag sweep report")
    args = parser.parse_args(argv)
    path = build_report(args.runs_dir, args.title)
    print(path.read_text().split("## Figures")[0])
    print(f"report: {path}")


if __name__ == "__main__":
    run_entry_point(main)
