"""Run a grid of heads x seeds x models (also ``clipmag-sweep``); finished cells are skipped.

python scripts/sweep.py --config configs/sweeps/demo.yaml [--only GROUP ...] [key=value ...]
"""

from clipmag_experiments.cli import sweep_entry

if __name__ == "__main__":
    sweep_entry()
