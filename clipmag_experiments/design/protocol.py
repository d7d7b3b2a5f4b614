"""``<sweep folder>/sweep.json``: the protocol on disk before the first result.

Before a sweep prepares or runs anything it appends an entry: the resolved sweep config, its
sha256, the code state (commit, dirty, diff hash), the command line, the time, and how its systems
will be compared on test (``comparison``: each head at its one setting, fixed or chosen on dev, the
chosen systems compared with cosine by the query-level randomisation test, Holm over the heads;
:mod:`clipmag_experiments.design.comparison`). A resumed sweep appends another entry and never rewrites
the earlier ones, so the file shows that the protocol came before the results and whether code or
protocol changed between starts - which the log says in one line each time they differ from the
first entry.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from clipmag.config.build import to_dict
from clipmag.config.spellings import current_spelling
from clipmag.errors import ConfigError
from clipmag.results.provenance import config_sha256, provenance
from clipmag.runtime.logs import logger
from clipmag.storage.files import write_text_atomic
from clipmag_experiments.design.comparison import comparison_statement
from clipmag_experiments.design.grid import SweepConfig

__all__ = ["PROTOCOL_FILE", "record_prepared", "record_start", "read_protocol"]

PROTOCOL_FILE = "sweep.json"


def read_protocol(folder: str | Path) -> list[dict[str, Any]]:
    """The entries of a sweep folder's ``sweep.json`` (empty when there is none)."""
    path = Path(folder) / PROTOCOL_FILE
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text(encoding="utf-8"))["starts"])
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a sweep protocol file ({err}); move it away to start the record anew") from None


def _differences(first: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """What changed since the first start. The configs are compared in today's spelling (a protocol
    stored as ``embedded:indomain`` or ``data.embedded.root=x`` and a start given ``bundled:indomain`` or
    ``data.bundled.root=x`` are one protocol)."""
    out = []
    before_config, now_config = (current_spelling(_protocol_part(e["config"])) for e in (first, entry))
    if config_sha256(before_config) != config_sha256(now_config):
        out.append(f"the sweep config changed (sha256 {first['config_sha256'][:12]} -> {entry['config_sha256'][:12]})")
    before, now = first["code"], entry["code"]
    if before.get("commit") != now.get("commit"):
        out.append(f"the code moved from commit {before.get('commit')} to {now.get('commit')}")
    if (before.get("dirty"), before.get("diff_sha256")) != (now.get("dirty"), now.get("diff_sha256")):
        out.append(
            f"the working tree was {'dirty' if before.get('dirty') else 'clean'} and is "
            f"{'dirty' if now.get('dirty') else 'clean'} (diff {now.get('diff_sha256')})"
        )
    return out


def _protocol_part(config: dict[str, Any]) -> dict[str, Any]:
    """A start's config without ``only`` (which cells one sitting runs is not the protocol; starts
    recorded before it was kept apart carry it in their config)."""
    return {key: value for key, value in config.items() if key != "only"}


def record_start(cfg: SweepConfig) -> dict[str, Any]:
    """Append this start to ``sweep.json`` (creating it) and warn where it differs from the first.
    The config and its hash are the protocol's; the cells a sitting picked (``only``) stand beside."""
    folder = Path(cfg.output_dir)
    starts = read_protocol(folder)
    config = to_dict(cfg)
    only = config.pop("only", None)
    entry = {**provenance(config), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    entry |= {"only": only} if only else {}
    entry["comparison"] = comparison_statement(cfg.comparison, cfg.groups)
    for line in _differences(starts[0], entry) if starts else []:
        logger.warning("%s: since this sweep first started, %s", folder / PROTOCOL_FILE, line)
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / PROTOCOL_FILE, json.dumps({"starts": [*starts, entry]}, indent=1, default=str) + "\n")
    return entry


def record_prepared(folder: str | Path, prepared: dict[str, dict[str, str]]) -> None:
    """Add the prepare steps' fingerprints (step -> file -> sha256) to this start's entry, refusing
    a file that differs from the one an earlier start recorded: a start rebuilt on a fresh machine
    that is not the earlier sittings' start would mix two starts in one table. Call it after
    :func:`record_start`, before any cell runs."""
    path = Path(folder) / PROTOCOL_FILE
    starts = read_protocol(folder)
    for earlier in starts[:-1]:
        for step, digests in (earlier.get("prepared") or {}).items():
            for file, digest in digests.items():
                now = prepared.get(step, {}).get(file)
                if now is not None and now != digest:
                    raise ConfigError(
                        f"{path}: prepare step {step!r} built {file} anew and it differs from the one the start of "
                        f"{earlier.get('started')} recorded (sha256 {digest[:12]} then, {now[:12]} now), so cells "
                        "stored from the earlier one would sit beside cells from this one; bring the earlier file "
                        "back or run the sweep in a new folder"
                    )
    starts[-1]["prepared"] = prepared
    write_text_atomic(path, json.dumps({"starts": starts}, indent=1, default=str) + "\n")
