"""Evaluation settings: which BRIGHT setting to load, how strict to be, and the evaluation-time encoding.

The same settings come from the command line (``scripts/eval_text.py`` flags) or from a settings
file given in place of a dataset path, ``--data configs/eval/bright_official.yaml`` or an entry of
a trainer's ``data.test``, so one sweep cell can test its model in several settings side by side::

    bright: data/bright            # a BRIGHT root (folder of task folders) or one task folder
    name: official                 # suffix of the dataset names (bright-biology@official)
    long_documents: false          # long_documents.jsonl scored against gold_ids_long
    reasoning: null                # e.g. gpt4_reason: queries from <task>/gpt4_reason.jsonl
    strict: false                  # gold ids missing from the corpus: error instead of kept
    query_prefix: null             # a template, or {<task>: template, default: template}
    document_prefix: null
    query_max_length: null         # explicit lengths; otherwise the model's own limit,
    document_max_length: null      # capped by max_length_cap
    max_length_cap: 4096

Prefix templates have ``{task}`` filled with the BRIGHT task name (the dataset name elsewhere);
``None`` keeps the model's own prefix. Relative paths are taken from the current directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.config.build import read_yaml
from clipmag.storage.user_files import read_utf8

# BRIGHT's reasoning-augmented query sets (the hub configs whose ``query`` holds an LLM's reasoning).
REASONING_CONFIGS = ("gpt4_reason", "claude-3-opus_reason", "Gemini-1.0_reason", "llama3-70b_reason", "grit_reason")

__all__ = ["DEFAULT_MAX_LENGTH_CAP", "EvalSettings", "is_settings_file", "read_settings_file"]

# The official BRIGHT runs of e5-mistral and SFR-Embedding encode up to 4096 tokens.
DEFAULT_MAX_LENGTH_CAP = 4096
SETTINGS_SUFFIXES = (".yaml", ".yml")
Template = str | dict[str, str] | None


def _check_template(value: Template, where: str) -> None:
    templates = value.values() if isinstance(value, dict) else [value]
    for template in templates:
        try:
            template.format(task="t")  # type: ignore[union-attr]
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(
                f"{where}: expected a prefix template whose only placeholder is {{task}} (write a literal brace "
                f"as {{{{ or }}}}), found {template!r} ({type(err).__name__}: {err})"
            ) from None


@dataclass(frozen=True)
class EvalSettings:
    """What one evaluation selects and how it encodes; the defaults are BRIGHT's official rules."""

    name: str = ""
    long_documents: bool = False
    reasoning: str | None = None
    strict: bool | None = None  # None: each loader's own default (BEIR strict, BRIGHT official)
    query_prefix: Template = None
    document_prefix: Template = None
    query_max_length: int | None = None
    document_max_length: int | None = None
    max_length_cap: int = DEFAULT_MAX_LENGTH_CAP

    def __post_init__(self) -> None:
        if self.reasoning is not None and self.reasoning not in REASONING_CONFIGS:
            raise ValueError(
                f"unknown BRIGHT reasoning config {self.reasoning!r}; valid: {', '.join(REASONING_CONFIGS)}"
            )
        for key in ("query_max_length", "document_max_length", "max_length_cap"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ValueError(f"{key} must be a positive number of tokens, got {value}")
        for side in ("query", "document"):
            if getattr(self, f"{side}_prefix") is not None:
                _check_template(getattr(self, f"{side}_prefix"), f"{side}_prefix")

    def prefix(self, side: str, task: str) -> str | None:
        """The side's prefix for ``task`` with ``{task}`` filled, or None to keep the model's."""
        template = getattr(self, f"{side}_prefix")
        if isinstance(template, dict):
            template = template.get(task, template.get("default"))
        return None if template is None else template.format(task=task)


# key -> (types allowed, what the error says is expected)
_FILE_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "bright": ((str,), "a path"),
    "name": ((str,), "a string"),
    "long_documents": ((bool,), "true or false"),
    "reasoning": ((str, type(None)), f"null or one of {', '.join(REASONING_CONFIGS)}"),
    "strict": ((bool, type(None)), "true, false or null"),
    "query_prefix": ((str, dict, type(None)), "a template string, a {task: template} mapping or null"),
    "document_prefix": ((str, dict, type(None)), "a template string, a {task: template} mapping or null"),
    "query_max_length": ((int, type(None)), "a number of tokens or null"),
    "document_max_length": ((int, type(None)), "a number of tokens or null"),
    "max_length_cap": ((int,), "a number of tokens"),
}


def is_settings_file(path: str | Path) -> bool:
    """A YAML file in place of a dataset path is read as BRIGHT settings (no dataset layout uses YAML)."""
    path = Path(path)
    return path.is_file() and path.suffix in SETTINGS_SUFFIXES


def read_settings_file(path: str | Path) -> tuple[Path, EvalSettings]:
    """The BRIGHT root a settings file names and its settings; errors name the file and the key."""
    path = Path(path)
    values: Any = read_yaml(read_utf8(path), path)
    if not isinstance(values, dict) or "bright" not in values:
        raise ValueError(f"{path}: expected a mapping with a 'bright' key (the BRIGHT root) and evaluation settings")
    for key, value in values.items():
        if key not in _FILE_KEYS:
            raise ValueError(f"{path}: unknown key {key!r}; valid keys: {', '.join(_FILE_KEYS)}")
        types, expected = _FILE_KEYS[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"{path}: {key!r} expected {expected}, found {value!r}")
        if isinstance(value, dict) and not all(isinstance(v, str) for v in value.values()):
            raise ValueError(f"{path}: {key!r} expected template strings per task, found {value!r}")
    root = Path(values.pop("bright"))
    if not root.exists():
        raise FileNotFoundError(f"{path}: 'bright' root {root} not found (relative to {Path.cwd()})")
    values.setdefault("name", path.stem)
    try:
        return root, EvalSettings(**values)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
