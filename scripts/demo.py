"""The main job on the embedded defaults: head sweeps (text retrieval in and out of domain, the
symmetric STS-style task, CLIP in both directions), the qnorm/dnorm predictor, then report.md.

    python scripts/demo.py                      # what `make demo` runs; rerunning resumes
    python scripts/demo.py --config configs/sweeps/demo.yaml
"""

import argparse
import time
from pathlib import Path

from clipmag.entry import run_entry_point
from clipmag.report import build_report
from clipmag.run_logging import setup_logging
from clipmag.sweep import load_sweep_config, run_sweep
from text_retrieval.predict import main as predict_main

DEFAULT_SWEEP = Path(__file__).resolve().parents[1] / "configs" / "sweeps" / "demo.yaml"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_SWEEP))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cfg = load_sweep_config(args.config)
    setup_logging(cfg.output_dir)
    run_sweep(cfg)
    predictions = Path(cfg.output_dir) / "predict_norm.json"
    if not predictions.is_file():
        predict_main(["--model", "all-MiniLM-L6-v2", "--data", "embedded", "--n-pairs", "128", "--output", str(predictions)])
    report = build_report(cfg.output_dir, "clipmag demo: the five heads on the embedded defaults")
    print(report.read_text().split("## Figures")[0])
    print(f"demo finished in {(time.perf_counter() - start) / 60:.1f} min; report: {report.resolve()}")


if __name__ == "__main__":
    run_entry_point(main)
