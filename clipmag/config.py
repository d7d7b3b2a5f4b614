"""Typed configuration: dataclasses, defaults from YAML, overrides from the command line.

A run's configuration is one tree of dataclasses. Values come, in order, from the dataclass
defaults, an optional YAML file (``--config``) and the command line: dotted ``key=value`` tokens
(``optim.lr=1e-5``) and a few ``--flag value`` shorthands (``--norm dnorm`` for ``head.name=dnorm``).
Every key and every value is checked against the dataclass types before any work starts; an
unknown key or a wrong type raises ``ConfigError`` naming the key, where it came from, and the
valid choices. The resolved tree is written next to every run's outputs (``save_config``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from clipmag.files import write_text_atomic
from clipmag.resources import config_path

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration key or value that does not fit the schema."""


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_type_name(get_args(tp)[0])}"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    """Check ``value`` against type ``tp`` (converting ints to floats and lists to tuples)."""

    def fail() -> ConfigError:
        return ConfigError(f"{source}: key '{key}' expects {_type_name(tp)}, got {value!r}")

    origin = get_origin(tp)
    if tp is Any:
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
    hints = typing.get_type_hints(cls)
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


def build_config(
    cls: type[T],
    yaml_path: str | Path | None = None,
    overrides: Sequence[str] = (),
    base: Mapping[str, Any] | None = None,
) -> T:
    """Dataclass defaults <- ``base`` <- YAML file <- ``key=value`` overrides, all type-checked."""
    cfg = to_dict(cls())
    if base:
        _build(cls, base, "", "defaults")
        cfg = _merge(cfg, base)
    if yaml_path is not None:
        data = load_yaml(yaml_path)
        _build(cls, _merge(cfg, data), "", str(yaml_path))
        cfg = _merge(cfg, data)
    for token in overrides:
        if "=" not in token:
            raise ConfigError(f"command line: expected key=value, got {token!r}")
        key, text = token.split("=", 1)
        update: dict[str, Any] = {}
        _set_dotted(update, key.strip(), parse_value(text))
        _build(cls, _merge(cfg, update), "", "command line")
        cfg = _merge(cfg, update)
    return _build(cls, cfg, "", "config")


def parse_cli(
    cls: type[T],
    argv: Sequence[str],
    shorthands: Mapping[str, str],
    default_config: str | Path | None = None,
) -> T:
    """Parse ``[--config PATH] [--flag value ...] [key=value ...]`` into a checked config.

    ``shorthands`` maps flag names to dotted keys, e.g. ``{"norm": "head.name"}``.
    ``--help`` prints the keys and their defaults.
    """
    yaml_path = default_config
    overrides: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        token = args[i]
        if token in ("-h", "--help"):
            print(help_text(cls, shorthands))
            raise SystemExit(0)
        if token.startswith("--"):
            flag, _, inline = token[2:].partition("=")
            if inline == "" and "=" not in token:
                if i + 1 >= len(args):
                    raise ConfigError(f"command line: flag --{flag} needs a value")
                inline = args[i + 1]
                i += 1
            if flag == "config":
                yaml_path = inline
            elif flag.replace("-", "_") in shorthands:
                overrides.append(f"{shorthands[flag.replace('-', '_')]}={inline}")
            else:
                valid = ", ".join(f"--{k.replace('_', '-')}" for k in ("config", *shorthands))
                raise ConfigError(f"command line: unknown flag --{flag}; valid flags: {valid}, or dotted key=value")
        else:
            overrides.append(token)
        i += 1
    return build_config(cls, yaml_path, overrides)


def help_text(cls: type, shorthands: Mapping[str, str]) -> str:
    lines = ["usage: [--config PATH] [--FLAG VALUE ...] [key=value ...]", "", "flags:"]
    lines += [f"  --{flag.replace('_', '-'):<14} sets {key}" for flag, key in shorthands.items()]
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
