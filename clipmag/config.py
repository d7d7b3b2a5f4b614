"""Typed configuration: dataclasses, defaults from YAML, overrides from the command line.

A run's configuration is one tree of dataclasses. Values come, in order, from the dataclass
defaults, an optional YAML file (``--config``) and the command line: dotted ``key=value`` tokens
(``optim.lr=1e-5``) and a few ``--flag value`` shorthands (``--norm dnorm`` for ``head.name=dnorm``).
Every key and every value is checked against the dataclass types before any work starts; an
unknown key, a wrong type or a number out of its range (``Annotated[int, Range(1)]``, e.g.
``PositiveInt``) raises ``ConfigError`` naming the key, where it came from, and the valid choices.
The resolved tree is written next to every run's outputs (``save_config``).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from clipmag.files import write_text_atomic
from clipmag.resources import config_path

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration key or value that does not fit the schema."""


@dataclass(frozen=True)
class Range:
    """Bounds of a numeric key, attached as ``Annotated[int, Range(1)]``; ``open_low`` excludes ``low``."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False

    def holds(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.open_low else value >= self.low)
        return above and (self.high is None or value <= self.high)

    def __str__(self) -> str:
        parts = [f"{'>' if self.open_low else '>='} {self.low:g}"] if self.low is not None else []
        return " and ".join(parts + ([f"<= {self.high:g}"] if self.high is not None else []))


PositiveInt = Annotated[int, Range(1)]
NonNegativeInt = Annotated[int, Range(0)]
PositiveFloat = Annotated[float, Range(0, open_low=True)]
NonNegativeFloat = Annotated[float, Range(0)]
Fraction = Annotated[float, Range(0, 1)]


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extras = get_args(tp)
        return " ".join([_type_name(base), *(str(e) for e in extras if isinstance(e, Range))])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_type_name(get_args(tp)[0])}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    """Check ``value`` against type ``tp`` (converting ints to floats and lists to tuples)."""

    def fail() -> ConfigError:
        return ConfigError(f"{source}: key '{key}' expects {_type_name(tp)}, got {value!r}")

    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        base, *extras = get_args(tp)
        value = _coerce(value, base, key, source)
        if any(isinstance(e, Range) and not e.holds(value) for e in extras):
            raise fail()
        return value
    if origin is Literal:
        if value not in get_args(tp):
            raise fail()
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, source)
            except ConfigError:
                continue
        raise fail()
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise fail()
        item_tp = get_args(tp)[0]
        items = [_coerce(v, item_tp, key, source) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise fail()
        key_tp, value_tp = get_args(tp)
        return {_coerce(k, key_tp, key, source): _coerce(v, value_tp, f"{key}.{k}", source) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise fail()
        return _build(tp, value, key, source)
    if tp is bool:
        if not isinstance(value, bool):
            raise fail()
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail()
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail()
        return value
    if tp is str:
        if not isinstance(value, str):
            raise fail()
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise fail()
    return value


def _fields(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _build(cls: type[T], values: Mapping[str, Any], prefix: str, source: str) -> T:
    fields = _fields(cls)
    kwargs = {}
    for name, value in values.items():
        key = f"{prefix}.{name}" if prefix else name
        if name not in fields:
            where = f"'{prefix}'" if prefix else "the top level"
            raise ConfigError(f"{source}: unknown key '{key}'; valid keys of {where}: {', '.join(fields)}")
        kwargs[name] = _coerce(value, fields[name], key, source)
    return cls(**kwargs)


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
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    # YAML 1.1 reads '1e-5' (no dot) as a string; accept it as a float.
    if isinstance(value, str):
        try:
            return float(value) if any(c in value.lower() for c in "e.") else value
        except ValueError:
            return value
    return value


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path``, or from the packaged config of that name (``configs/...``)."""
    path = config_path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


# A dotted ``key=value`` token (a path such as ``runs/a=b`` is not one: '/' ends the key).
_OVERRIDE = re.compile(r"^[A-Za-z_][\w.]*=")


def key_type(cls: type, dotted: str) -> Any:
    """The annotated type of a dotted key of ``cls`` (``Any`` for a key it lacks: ``_build`` names it)."""
    tp: Any = cls
    for part in dotted.split("."):
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or part not in _fields(tp):
            return Any
        tp = _fields(tp)[part]
    return tp


def _alternatives(tp: Any) -> tuple[Any, ...]:
    """The plain types ``tp`` admits, through ``Annotated``, unions and string ``Literal`` s."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _alternatives(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return tuple(a for arg in get_args(tp) for a in _alternatives(arg))
    if origin is Literal:
        return tuple({type(a) for a in get_args(tp)})
    return (origin or tp,)


def _text_value(text: str, tp: Any) -> Any:
    """A command-line value for a key of type ``tp``: YAML-parsed, but kept as text where the key takes
    text and the parsed value would not fit (``output=2024``, ``--query-prefix 'yes'``)."""
    value = parse_value(text)
    if isinstance(value, str) or str not in _alternatives(tp):
        return value
    try:
        _coerce(value, tp, "", "")
    except ConfigError:
        return text
    return value


def _cli_value(values: Sequence[str], tp: Any) -> Any:
    """One or several command-line words as the value of a key of type ``tp`` (a list key takes
    every word; one word that is not a YAML list becomes a list of one)."""
    lists = _list_types(tp)
    if lists:
        item_tp = get_args(lists[0])[0]
        if len(values) == 1 and isinstance(parse_value(values[0]), list):
            return parse_value(values[0])
        return [_text_value(v, item_tp) for v in values]
    return _text_value(values[0], tp)


def _list_types(tp: Any) -> list[Any]:
    """The list or tuple types among the alternatives of ``tp``."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _list_types(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return [a for arg in get_args(tp) for a in _list_types(arg)]
    return [tp] if origin in (list, tuple) else []


def _override(cls: type, token: str) -> tuple[str, Any]:
    if "=" not in token:
        raise ConfigError(f"command line: expected key=value or --flag, got {token!r}")
    key, text = token.split("=", 1)
    return key.strip(), _cli_value([text], key_type(cls, key.strip()))


def build_config(
    cls: type[T],
    yaml_path: str | Path | None = None,
    overrides: Sequence[str | tuple[str, Any]] = (),
    base: Mapping[str, Any] | None = None,
) -> T:
    """Dataclass defaults <- ``base`` <- YAML file <- overrides, all type-checked.

    An override is a ``key=value`` token or an already parsed ``(key, value)`` pair."""
    cfg = to_dict(cls())
    if base:
        _build(cls, base, "", "defaults")
        cfg = _merge(cfg, base)
    if yaml_path is not None:
        data = load_yaml(yaml_path)
        _build(cls, _merge(cfg, data), "", str(yaml_path))
        cfg = _merge(cfg, data)
    for item in overrides:
        key, value = _override(cls, item) if isinstance(item, str) else item
        update: dict[str, Any] = {}
        _set_dotted(update, key, value)
        _build(cls, _merge(cfg, update), "", "command line")
        cfg = _merge(cfg, update)
    return _build(cls, cfg, "", "config")


def _is_switch(tp: Any) -> bool:
    """A boolean key (or boolean-or-None): its flag takes no value."""
    return set(_alternatives(tp)) <= {bool, type(None)} and bool in _alternatives(tp)


def _flag_words(args: Sequence[str], i: int, flag: str, tp: Any) -> tuple[list[str], int]:
    """The words after ``--flag`` at ``args[i]`` that are its value, and the index after them: none
    for a boolean key, every word up to the next flag or ``key=value`` for a list key, else one."""
    if _is_switch(tp):
        return ["true"], i
    if _list_types(tp):
        end = i
        while end < len(args) and not args[end].startswith("--") and not _OVERRIDE.match(args[end]):
            end += 1
        if end == i:
            raise ConfigError(f"command line: flag --{flag} needs at least one value")
        return list(args[i:end]), end
    if i >= len(args):
        raise ConfigError(f"command line: flag --{flag} needs a value")
    return [args[i]], i + 1


def parse_cli(
    cls: type[T],
    argv: Sequence[str],
    shorthands: Mapping[str, str],
    default_config: str | Path | None = None,
    description: str = "",
) -> T:
    """Parse ``[--config PATH] [--flag value ...] [key=value ...]`` into a checked config.

    ``shorthands`` maps flag names to dotted keys, e.g. ``{"norm": "head.name"}``. A flag takes the
    value its key's type calls for: none for a boolean (``--quiet``), one or more words for a list
    (``--norm cosine dot``), else one; ``--flag=value`` always works. ``--help`` prints the flags
    and every key with its default, after ``description``.
    """
    yaml_path = default_config
    overrides: list[tuple[str, Any]] = []
    args = list(argv)
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token in ("-h", "--help"):
            print(help_text(cls, shorthands, description))
            raise SystemExit(0)
        if not token.startswith("--"):
            overrides.append(_override(cls, token))
            continue
        flag, has_inline, inline = token[2:].partition("=")
        name = flag.replace("-", "_")
        if name != "config" and name not in shorthands:
            valid = ", ".join(f"--{k.replace('_', '-')}" for k in ("config", *shorthands))
            raise ConfigError(f"command line: unknown flag --{flag}; valid flags: {valid}, or dotted key=value")
        tp = str if name == "config" else key_type(cls, shorthands[name])
        words, i = ([inline], i) if has_inline else _flag_words(args, i, flag, tp)
        if name == "config":
            yaml_path = words[0]
        else:
            overrides.append((shorthands[name], _cli_value(words, tp)))
    return build_config(cls, yaml_path, overrides)


def field_flags(cls: type) -> dict[str, str]:
    """Every top-level key of a flat config as its own flag (``--top-k`` sets ``top_k``)."""
    return {f.name: f.name for f in dataclasses.fields(cls)}


def help_text(cls: type, shorthands: Mapping[str, str], description: str = "") -> str:
    """``--help``: the description, the flags with the key each sets (and how many values it takes), the keys."""

    def takes(key: str) -> str:
        tp = key_type(cls, key)
        return "  (no value)" if _is_switch(tp) else "  (one or more values)" if _list_types(tp) else ""

    lines = [description.strip(), ""] if description else []
    lines += ["usage: [--config PATH] [--FLAG VALUE ...] [key=value ...]", "", "flags:"]
    lines += [f"  --{flag.replace('_', '-'):<22} sets {key}{takes(key)}" for flag, key in shorthands.items()]
    return "\n".join(lines + ["", config_keys_text(cls)])


def config_keys_text(cls: type) -> str:
    """Every dotted key of the config ``cls`` with its default and type (what ``key=value`` sets)."""
    lines = ["keys (default):"]

    def walk(obj: Any, prefix: str) -> None:
        for name, tp in _fields(type(obj)).items():
            value = getattr(obj, name)
            key = f"{prefix}{name}"
            if dataclasses.is_dataclass(value):
                walk(value, key + ".")
            else:
                lines.append(f"  {key} = {value!r}   ({_type_name(tp)})")

    walk(cls(), "")
    return "\n".join(lines)


def save_config(cfg: Any, path: str | Path) -> None:
    """Write the resolved configuration as YAML (atomically)."""
    write_text_atomic(path, yaml.safe_dump(to_dict(cfg), sort_keys=False))


def config_from_dict(cls: type[T], values: Mapping[str, Any], source: str = "saved config") -> T:
    """Rebuild a config saved with ``to_dict`` (e.g. from a checkpoint)."""
    return _build(cls, _merge(to_dict(cls()), values), "", source)
