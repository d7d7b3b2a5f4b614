"""Run a grid of heads x seeds x models; finished cells are skipped, so rerunning resumes.

    python scripts/sweep.py --config configs/sweeps/demo.yaml [--only GROUP ...] [key=value ...]
"""

import argparse

from clipmag.entry import run_entry_point
from clipmag.run_logging import setup_logging
from clipmag.sweep import load_sweep_config, run_sweep


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="sweep YAML (configs/sweeps/)")
    parser.add_argument("--only", nargs="*", default=[], help="run only these groups")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides of the sweep config")
    args = parser.parse_args(argv)
    cfg = load_sweep_config(args.config, args.overrides)
    setup_logging(cfg.output_dir)
    run_sweep(cfg, args.only)


if __name__ == "__main__":
    run_entry_point(main)
