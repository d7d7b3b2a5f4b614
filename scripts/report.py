"""Collect a sweep's runs into report.md with tables and figures (also ``clipmag-report``).

python scripts/report.py runs/demo
"""

from clipmag_experiments.cli import report_entry

if __name__ == "__main__":
    report_entry()
