"""The main job on the bundled defaults (``make demo``; also ``clipmag-demo``): head sweeps, the
qnorm/dnorm predictor, then report.md. Rerunning resumes.

    python scripts/demo.py
    python scripts/demo.py --config configs/sweeps/demo.yaml
"""

from clipmag_experiments.cli import demo_entry

if __name__ == "__main__":
    demo_entry()
