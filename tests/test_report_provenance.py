"""The report names the code behind its tables and refuses to mix code states unless asked."""

from __future__ import annotations

import json

import pytest

from clipmag.experiments.cli import report_main
from clipmag.experiments.report import build_report
from clipmag.experiments.report.provenance import MixedCode
from clipmag.head_record import HeadRecord
from clipmag.results import build_results, write_results

CLEAN = {"commit": "a" * 40, "dirty": False, "diff_sha256": None, "reason": None}
OTHER = {"commit": "b" * 40, "dirty": False, "diff_sha256": None, "reason": None}
DIRTY = {"commit": "a" * 40, "dirty": True, "diff_sha256": "c" * 64, "reason": None}


def _cell(root, head: str, seed: int, code: dict | None) -> None:
    folder = root / "g" / "default" / head / f"seed{seed}"
    folder.mkdir(parents=True)
    metric = {"NDCG@10": 0.5 + 0.01 * seed + (0.02 if head == "cosine" else 0.0)}
    (folder / "cell.json").write_text(json.dumps({"group": "g", "kind": "text", "head": head, "seed": seed}))
    record = build_results({"steps": 3, "seed": seed}, HeadRecord({"name": head}), {}, {"set": metric}, {}, {})
    if code is None:
        del record["provenance"]  # written before results named their code
    else:
        record["provenance"]["code"] = code
    write_results(record, folder)


def test_one_clean_commit_is_named_under_every_table(tmp_path):
    for head in ("cosine", "dot"):
        for seed in (0, 1):
            _cell(tmp_path, head, seed, CLEAN)
    report = build_report(tmp_path).read_text()
    assert f"Code: commit {'a' * 12} (4 runs)." in report
    retrieval = report[report.index("## Retrieval") :]
    assert retrieval.split("\n")[2] == f"Code: commit {'a' * 12} (4 runs)."


@pytest.mark.parametrize(
    ("codes", "named"),
    [
        ((CLEAN, OTHER), [f"commit {'a' * 12}: 2 cells", f"commit {'b' * 12}: 2 cells"]),
        ((CLEAN, DIRTY), [f"commit {'a' * 12}, dirty tree (diff {'c' * 12}): 2 cells"]),
        ((CLEAN, None), ["no commit recorded (written before results named their code): 2 cells"]),
    ],
)
def test_mixed_code_states_are_refused_naming_the_cells_unless_allowed(tmp_path, codes, named):
    for seed, code in enumerate(codes):
        for head in ("cosine", "dot"):
            _cell(tmp_path, head, seed, code)
    with pytest.raises(MixedCode) as err:
        build_report(tmp_path)
    message = str(err.value)
    assert all(part in message for part in named) and "--allow-mixed" in message and "\n" not in message
    assert "g/default/cosine/seed" in message  # the cells are named
    path = report_main([str(tmp_path), "--allow-mixed"])
    assert "Code: **mixed** - " in path.read_text()
