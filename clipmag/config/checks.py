"""The checks behind every config key: types (``Literal``, unions, lists, nested dataclasses) and
numeric ranges attached with ``Annotated``, so ``train.grad_accum=0`` is refused with the key's name
before any work starts. :mod:`clipmag.config.build` builds configs with them."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from clipmag.errors import ConfigError
from clipmag.storage.user_files import preview

logger = logging.getLogger("clipmag")
RETIRED = "retired_keys"  # a section's ClassVar: key -> what replaced it (see build)


@dataclass(frozen=True)
class Range:
    """Bounds of a numeric key, attached as ``Annotated[int, Range(1)]``; ``open_low`` excludes ``low``,
    ``open_high`` excludes ``high``."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def holds(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.open_low else value >= self.low)
        below = self.high is None or (value < self.high if self.open_high else value <= self.high)
        return above and below

    def __str__(self) -> str:
        parts = [f"{'>' if self.open_low else '>='} {_bound(self.low)}"] if self.low is not None else []
        parts += [f"{'<' if self.open_high else '<='} {_bound(self.high)}"] if self.high is not None else []
        return " and ".join(parts)


def _bound(value: float) -> str:
    """A bound as a reader checks it: a large whole number in full (a seed's 4294967295), else short."""
    return str(int(value)) if value == int(value) and abs(value) >= 1e6 else f"{value:g}"


PositiveInt = Annotated[int, Range(1)]
NonNegativeInt = Annotated[int, Range(0)]
PositiveFloat = Annotated[float, Range(0, open_low=True)]
NonNegativeFloat = Annotated[float, Range(0)]
Fraction = Annotated[float, Range(0, 1)]
# What numpy's and Python's generators take as a seed (numpy refuses a negative one or 2**32 and above).
Seed = Annotated[int, Range(0, 2**32 - 1)]


# What torch, numpy and every seeded generator take: an int beyond it fails deep inside a run.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _finite(value: int | float, key: str, source: str) -> float:
    """``value`` as a finite float. No setting means anything by inf or nan, and the command line and YAML
    both spell them in passing (``1e999``, ``.inf``, ``.nan``), so they are refused here, before any
    range check a nan would slip through or an inf would pass (``optim.lr=1e999``)."""
    expects = f"{source}: key '{key}' expects a finite number"
    try:
        number = float(value)
    except OverflowError:
        raise ConfigError(f"{expects}, got an int too large for a float") from None
    if not math.isfinite(number):
        raise ConfigError(f"{expects}, got {value!r} (the command line reads 1e999 as inf, YAML .inf and .nan)")
    return number


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extras = get_args(tp)
        return " ".join([type_name(base), *(str(e) for e in extras if isinstance(e, Range))])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if origin in (list, tuple):
        return f"a list of {type_name(get_args(tp)[0])}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, key: str, source: str, construct: bool = True) -> Any:
    """Check ``value`` against type ``tp`` (converting ints to floats and lists to tuples); a nested
    config section is built (``construct``) or only checked key by key (see :func:`build`)."""

    def fail() -> ConfigError:
        return ConfigError(f"{source}: key '{key}' expects {type_name(tp)}, got {preview(value)}")

    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        base, *extras = get_args(tp)
        value = coerce(value, base, key, source, construct)
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
                return coerce(value, arg, key, source, construct)
            except ConfigError:
                continue
        raise fail()
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise fail()
        item_tp = get_args(tp)[0]
        items = [coerce(v, item_tp, key, source, construct) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise fail()
        key_tp, value_tp = get_args(tp)
        return {
            coerce(k, key_tp, key, source, construct): coerce(v, value_tp, f"{key}.{k}", source, construct)
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise fail()
        return build(tp, value, key, source, construct)
    if tp is bool:
        if not isinstance(value, bool):
            raise fail()
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail()
        return _finite(value, key, source)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail()
        if not INT64_MIN <= value <= INT64_MAX:
            raise ConfigError(f"{source}: key '{key}' expects an int that fits in 64 bits, got {value}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise fail()
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise fail()
    return value


@functools.cache
def config_fields(cls: type) -> Mapping[str, Any]:
    """Each field of a config section with its resolved type, read-only. Kept per class: resolving a
    section's string annotations evaluates every one of them, and each command line and config file
    builds its sections key by key, so a sweep checking its cells would resolve them hundreds of
    thousands of times (most of a check's time); a class's fields never change while it runs."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return types.MappingProxyType({f.name: hints[f.name] for f in dataclasses.fields(cls)})


def alternatives(tp: Any) -> tuple[Any, ...]:
    """The plain types ``tp`` admits, through ``Annotated``, unions and string ``Literal`` s."""
    origin = get_origin(tp)
    if origin is Annotated:
        return alternatives(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return tuple(a for arg in get_args(tp) for a in alternatives(arg))
    if origin is Literal:
        return tuple({type(a) for a in get_args(tp)})
    return (origin or tp,)


def list_types(tp: Any) -> list[Any]:
    """The list or tuple types among the alternatives of ``tp``."""
    origin = get_origin(tp)
    if origin is Annotated:
        return list_types(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return [a for arg in get_args(tp) for a in list_types(arg)]
    return [tp] if origin in (list, tuple) else []


def _required(field: dataclasses.Field) -> bool:
    """A field without a default, which a section built from user values must be given."""
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def build(cls: type, values: Mapping[str, Any], prefix: str, source: str, construct: bool = True) -> Any:
    """``cls`` from ``values``, every key checked against its type. ``construct=False`` checks the keys
    only: a section's own cross-key checks (its ``__post_init__``) wait for the finished tree, so the
    order of ``key=value`` overrides never matters. A section refusing its values names itself.

    A key the section lists in its ``retired_keys`` is one it no longer reads: dropped, with one
    warning line when the section is built, so that old configs (a stored run's ``config.yaml``) load."""
    fields = config_fields(cls)
    retired = getattr(cls, RETIRED, {})
    kwargs = {}
    for name, value in values.items():
        key = f"{prefix}.{name}" if prefix else name
        if name in retired and name not in fields:
            if construct:
                logger.warning("%s: key '%s' is no longer read (%s); drop it", source, key, retired[name])
            continue
        if name not in fields:
            where = f"'{prefix}'" if prefix else "the top level"
            raise ConfigError(f"{source}: unknown key '{key}'; valid keys of {where}: {', '.join(fields)}")
        kwargs[name] = coerce(value, fields[name], key, source, construct)
    if not construct:
        return kwargs
    missing = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in kwargs and _required(f)]
    if missing:
        where = f"key '{prefix}'" if prefix else "the top level"
        raise ConfigError(f"{source}: {where} needs {', '.join(repr(name) for name in missing)}; give a value for each")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{source}: {f'section {prefix!r}: ' if prefix else ''}{err}") from None
