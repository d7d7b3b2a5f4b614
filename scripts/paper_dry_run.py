"""Dry-run every paper config on CPU: stand-in data, tiny models, two steps per cell, the report.

python scripts/paper_dry_run.py [--only text sts clip rag] [--root runs/paper-dry-run] [--full]
"""

from clipmag_experiments.dry_run.paper import entry

if __name__ == "__main__":
    entry()
