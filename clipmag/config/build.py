"""Typed configuration: dataclasses, defaults from YAML, overrides from the command line.

A run's configuration is one tree of dataclasses. Values come, in order, from the dataclass
defaults, an optional YAML file (``--config``) and the command line: dotted ``key=value`` tokens
(``optim.lr=1e-5``) and a few ``--flag value`` shorthands (``--norm dnorm`` for ``head.name=dnorm``).
Every key and every value is checked against the dataclass types (:mod:`clipmag.config.checks`)
before any work starts; an unknown key, a wrong type or a number out of its range
(``Annotated[int, Range(1)]``, e.g. ``PositiveInt``) raises ``ConfigError`` naming the key, where it
came from, and the valid choices. The resolved tree is written next to every run's outputs
(``config_yaml``). The command line's words are read by :mod:`clipmag.config.command_line`.

A config class that renamed a key lists it in ``RENAMED_KEYS`` (a class attribute, old dotted key ->
new one, e.g. ``{"norm": "head.name"}``, or a whole section, ``{"data.embedded": "data.bundled"}``):
the old name still works, in a YAML file or as ``key=value``, with one warning line naming the new
one. Renamed flags (``RENAMED_FLAGS``) and values (``RENAMED_VALUES``) work alike
(:mod:`clipmag.config.spellings`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml

from clipmag.config.checks import alternatives, build, coerce, config_fields, list_types, type_name
from clipmag.config.spellings import current_key, renamed_keys_tree, renamed_value, respelled_tree
from clipmag.errors import ConfigError
from clipmag.registry.config_packages import config_path
from clipmag.storage.user_files import read_utf8

__all__ = [
    "to_dict",
    "parse_value",
    "load_yaml",
    "key_type",
    "cli_value",
    "parse_override",
    "build_config",
    "config_keys_text",
    "config_yaml",
    "config_from_dict",
]

T = TypeVar("T")


def to_dict(cfg: Any) -> dict[str, Any]:
    """A plain nested dict (tuples as lists) that YAML and JSON can write."""

    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return plain(cfg)


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {} if child is None else child
            node[part] = child
        node = child
    node[parts[-1]] = value


def parse_value(text: str) -> Any:
    """YAML scalar parsing for command-line values: ``1e-5`` -> float, ``true`` -> bool, ``[1,2]``."""
    try:
        value = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass, bounded
    except yaml.YAMLError:
        return text
    except ConfigError as err:
        raise ConfigError(f"command line: {err}") from None
    except RecursionError:
        raise ConfigError(f"command line: {text[:40]!r}...: values nested too deeply to read") from None
    # YAML 1.1 reads '1e-5' (no dot) as a string; accept it as a float.
    if isinstance(value, str):
        try:
            return float(value) if any(c in value.lower() for c in "e.") else value
        except ValueError:
            return value
    return value


# The most values a config may hold once its aliases are expanded: a sweep of hundreds of cells holds
# a few thousand. Nine levels of ten aliases each (an "alias bomb") expand to a billion, which a
# type check walks and an error message prints for minutes and gigabytes.
MAX_CONFIG_VALUES = 100_000


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """How many values ``node`` holds once every alias under it is expanded (an alias is the very
    node its anchor names, so each node is counted once and its size reused); a ``ConfigError``
    naming the line where the count passes :data:`MAX_CONFIG_VALUES` or an alias holds itself."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    line = node.start_mark.line + 1
    if key in open_nodes:
        raise ConfigError(f"line {line}: an alias refers to the value that holds it; write the value out")
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    open_nodes.add(key)
    size = 1 + sum(_expanded_size(child, sizes, open_nodes) for child in children)
    open_nodes.discard(key)
    if size > MAX_CONFIG_VALUES:
        raise ConfigError(
            f"line {line}: its aliases (*name) expand to more than {MAX_CONFIG_VALUES:,} values; "
            "a config this large is refused: write the values out, or use fewer aliases"
        )
    sizes[key] = size
    return size


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys without a word (``steps: 2`` then ``steps: 5``
    trains 5 steps); this loader refuses the second, naming its line. It also refuses a document
    whose aliases expand beyond :data:`MAX_CONFIG_VALUES` values, before anything is built from it."""

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(f"line {line}: key {key!r} appears twice (first at line {seen[key]}); keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(text: str, source: str | Path) -> Any:
    """Parse YAML ``text`` read from ``source``, refusing repeated keys; errors name the source."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{source}: values nested too deeply to read; flatten them") from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path``, or from the packaged config of that name (``configs/...``)."""
    path = config_path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, where a config file is expected; give the YAML file in it")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    data = read_yaml(read_utf8(path), path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


def key_type(cls: type, dotted: str) -> Any:
    """The annotated type of a dotted key of ``cls`` (``Any`` for a key it lacks: ``_build`` names it)."""
    tp: Any = cls
    for part in dotted.split("."):
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or part not in config_fields(tp):
            return Any
        tp = config_fields(tp)[part]
    return tp


def _text_value(text: str, tp: Any) -> Any:
    """A command-line value for a key of type ``tp``: YAML-parsed, but kept as text where the key takes
    text and the parsed value would not fit (``output=2024``, ``--query-prefix 'yes'``)."""
    value = parse_value(text)
    if isinstance(value, str) or str not in alternatives(tp):
        return value
    try:
        coerce(value, tp, "", "")
    except ConfigError:
        return text
    return value


def cli_value(values: Sequence[str], tp: Any) -> Any:
    """One or several command-line words as the value of a key of type ``tp`` (a list key takes
    every word; one word that is not a YAML list becomes a list of one)."""
    lists = list_types(tp)
    if lists:
        item_tp = get_args(lists[0])[0]
        if len(values) == 1 and isinstance(parse_value(values[0]), list):
            return parse_value(values[0])
        return [_text_value(v, item_tp) for v in values]
    return _text_value(values[0], tp)


def parse_override(cls: type, token: str) -> tuple[str, Any]:
    if "=" not in token:
        raise ConfigError(f"command line: expected key=value or --flag, got {token!r}")
    key, text = token.split("=", 1)
    key = current_key(cls, key.strip(), "command line")
    return key, cli_value([text], key_type(cls, key))


def build_config(
    cls: type[T],
    yaml_path: str | Path | Sequence[str | Path] | None = None,
    overrides: Sequence[str | tuple[str, Any]] = (),
    base: Mapping[str, Any] | None = None,
) -> T:
    """Dataclass defaults <- ``base`` <- YAML file(s) <- overrides, all type-checked.

    Several YAML files are layered in order, each changing only the keys it holds (a tool's packaged
    defaults, then the user's ``--config``). An override is a ``key=value`` token or an already
    parsed ``(key, value)`` pair."""
    cfg = to_dict(cls())
    if base:
        build(cls, base, "", "defaults", construct=False)
        cfg = _merge(cfg, base)
    for path in _yaml_paths(yaml_path):
        data = respelled_tree(cls, renamed_keys_tree(cls, load_yaml(path), str(path)), str(path))
        build(cls, _merge(cfg, data), "", str(path), construct=False)
        cfg = _merge(cfg, data)
    for item in overrides:
        key, value = parse_override(cls, item) if isinstance(item, str) else item
        value = renamed_value(cls, key, value, "command line")
        update: dict[str, Any] = {}
        _set_dotted(update, key, value)
        build(cls, _merge(cfg, update), "", "command line", construct=False)
        cfg = _merge(cfg, update)
    return build(cls, cfg, "", "config")


def _yaml_paths(yaml_path: str | Path | Sequence[str | Path] | None) -> list[str | Path]:
    if yaml_path is None:
        return []
    return [yaml_path] if isinstance(yaml_path, (str, Path)) else list(yaml_path)


def config_keys_text(cfg: Any) -> str:
    """Every dotted key of the config ``cfg`` with its value and type (what ``key=value`` sets)."""
    lines = ["keys (the values this command runs with):"]

    def walk(obj: Any, prefix: str) -> None:
        for name, tp in config_fields(type(obj)).items():
            value = getattr(obj, name)
            key = f"{prefix}{name}"
            if dataclasses.is_dataclass(value):
                walk(value, key + ".")
            else:
                lines.append(f"  {key} = {value!r}   ({type_name(tp)})")

    walk(cfg, "")
    return "\n".join(lines)


def config_yaml(cfg: Any) -> str:
    """The resolved configuration as YAML, keys in declaration order (a run's ``config.yaml``)."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def config_from_dict(cls: type[T], values: Mapping[str, Any], source: str = "saved config") -> T:
    """Rebuild a config saved with ``to_dict`` (e.g. from a checkpoint), its renamed keys and values
    read in their new spelling (one warning each) as a config file's are."""
    respelled = respelled_tree(cls, renamed_keys_tree(cls, dict(values), source), source)
    return build(cls, _merge(to_dict(cls()), respelled), "", source)
