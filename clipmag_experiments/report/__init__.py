"""Paper-style reports of a sweep: tables (markdown, CSV), plots (PNG) and ``report.md``."""

from clipmag_experiments.report.build import build_report

__all__ = ["build_report"]
