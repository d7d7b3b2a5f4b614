"""Re-run one finished sweep cell from its record and compare its metrics (also ``clipmag-rerun-cell``).

python scripts/rerun_cell.py runs/demo/code-search/default/cosine/seed0
"""

from clipmag_experiments.sweep.rerun import rerun_entry

if __name__ == "__main__":
    rerun_entry()
