"""The protocol's Holm family: the heads of one row, or the whole table of compared groups at once."""

from __future__ import annotations

import json

from clipmag.results.significance import Comparison, holm
from clipmag_experiments.design.comparison import ComparisonProtocol, comparison_statement
from clipmag_experiments.design.grid import SweepGroup
from clipmag_experiments.design.protocol import PROTOCOL_FILE
from clipmag_experiments.report.comparison import comparison_section
from clipmag_experiments.report.starts import HeadResult, StartRow


def _row(group: str, p: dict[str, float]) -> StartRow:
    heads = {"cosine": HeadResult(per_seed={0: 0.5})}
    for name, value in p.items():
        comparison = Comparison(100, 3, 0.02, 0.01, 0.03, value, min(1.0, value * len(p)), None, 0.01)
        heads[name] = HeadResult(per_seed={0: 0.52}, comparison=comparison)
    return StartRow(group, "splade", "test", heads, {}, {})


def test_a_whole_table_family_corrects_every_comparison_of_every_compared_group(tmp_path):
    groups = [SweepGroup(name=n, heads=["cosine", "qnorm", "dnorm"]) for n in ("small", "large")]
    rows = [_row("small", {"qnorm": 0.015, "dnorm": 0.02}), _row("large", {"qnorm": 0.018, "dnorm": 0.3})]
    for family, expected_marks in (("row", 3), ("table", 0)):
        statement = comparison_statement(ComparisonProtocol(groups=["small", "large"], holm=family), groups)
        (tmp_path / PROTOCOL_FILE).write_text(json.dumps({"starts": [{"comparison": statement}]}))
        text = "\n".join(comparison_section(tmp_path, rows))
        assert text.count("▲") == expected_marks, text
    assert min(holm([0.015, 0.02, 0.018, 0.3])) > 0.05  # four tests corrected together: none passes
    assert "every comparison with cosine of every compared group" in text
