"""The command line of every clipmag tool: ``[--config YAML] [--flag value ...] [key=value ...]``.

Flags are shorthands for dotted keys of the tool's config dataclass and take the values the key's
type calls for; ``key=value`` sets any key; ``--help`` lists the flags and every key with the value
the command's arguments resolve to. What the words mean is checked by :mod:`clipmag.config.build`
against the dataclass types.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from clipmag.config.build import build_config, cli_value, config_keys_text, key_type, parse_override
from clipmag.config.checks import alternatives, list_types
from clipmag.config.spellings import current_flag
from clipmag.errors import ConfigError

T = TypeVar("T")

# A dotted ``key=value`` token (a path such as ``runs/a=b`` is not one: '/' ends the key).
_OVERRIDE = re.compile(r"^[A-Za-z_][\w.]*=")


def _is_switch(tp: Any) -> bool:
    """A boolean key (or boolean-or-None): its flag takes no value."""
    return set(alternatives(tp)) <= {bool, type(None)} and bool in alternatives(tp)


def _flag_words(args: Sequence[str], i: int, flag: str, tp: Any) -> tuple[list[str], int]:
    """The words after ``--flag`` at ``args[i]`` that are its value, and the index after them: none
    for a boolean key, every word up to the next flag or ``key=value`` for a list key, else one."""
    if _is_switch(tp):
        return ["true"], i
    if list_types(tp):
        end = i
        while end < len(args) and not args[end].startswith("--") and not _OVERRIDE.match(args[end]):
            end += 1
        if end == i:
            raise ConfigError(f"command line: flag --{flag} needs at least one value")
        return list(args[i:end]), end
    if i >= len(args):
        raise ConfigError(f"command line: flag --{flag} needs a value")
    return [args[i]], i + 1


def parse_cli(cls: type[T], argv: Sequence[str], shorthands: Mapping[str, str], **options: Any) -> T:
    """The checked config of a command line: :func:`parse_cli_and_file` (same ``options``) without the
    name of the YAML file it read."""
    return parse_cli_and_file(cls, argv, shorthands, **options)[0]


def parse_cli_and_file(
    cls: type[T],
    argv: Sequence[str],
    shorthands: Mapping[str, str],
    default_config: str | Path | None = None,
    description: str = "",
    positional: str | Sequence[str] | None = None,
    resolve: Callable[[T], T] | None = None,
) -> tuple[T, str | None]:
    """Parse ``[--config PATH] [--flag value ...] [key=value ...]`` into a checked config.

    The values come in layers, each changing only the keys it holds: the dataclass defaults, the
    tool's ``default_config`` (its packaged defaults, if it has any), the file of ``--config``, then
    the flags and ``key=value`` tokens in order; so a YAML file holding one key changes one key.
    ``resolve`` (the tool's own derivation of ``auto`` values and cross-key checks) finishes the config.

    ``shorthands`` maps flag names to dotted keys, e.g. ``{"norm": "head.name"}``, or to one
    ``key=value`` the flag stands for (``{"siglip": "loss.kind=siglip"}``). A flag takes the
    value its key's type calls for: none for a boolean (``--quiet``), one or more words for a list
    (``--norm cosine dot``), else one; ``--flag=value`` always works. ``--help`` prints
    ``description``, the flags and every key with the value a run of the same arguments would use.
    An old flag the config class renamed (``RENAMED_FLAGS``) still works, with one warning line.
    ``positional`` names the key a bare word (one that is neither a flag nor ``key=value``) sets,
    e.g. a folder a tool reads, or the keys bare words set in order (``NAME ROOT``). Returns the
    config and the YAML file it was read from (``None``: no file), for errors to name it.
    """
    bare_keys = _positional_keys(positional)
    bare_given = 0
    user_config: str | None = None
    wants_help = False
    overrides: list[tuple[str, Any]] = []
    args = list(argv)
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token in ("-h", "--help"):
            wants_help = True
            continue
        if bare_keys and not token.startswith("--") and not _OVERRIDE.match(token):
            if bare_given == len(bare_keys):
                expected = " ".join(key.upper() for key in bare_keys)
                counted = "one" if len(bare_keys) == 1 else f"{len(bare_keys)} words,"
                raise ConfigError(f"command line: {counted} {expected} expected, got another: {token!r}")
            key = bare_keys[bare_given]
            bare_given += 1
            overrides.append((key, cli_value([token], key_type(cls, key))))
            continue
        if not token.startswith("--"):
            overrides.append(parse_override(cls, token))
            continue
        flag, has_inline, inline = token[2:].partition("=")
        name = flag.replace("-", "_")
        if name != "config" and name not in shorthands:
            name = current_flag(cls, name) or name
        if name != "config" and name not in shorthands:
            valid = ", ".join(f"--{k.replace('_', '-')}" for k in ("config", *shorthands))
            raise ConfigError(f"command line: unknown flag --{flag}; valid flags: {valid}, or dotted key=value")
        if name != "config" and "=" in shorthands[name]:  # a switch that stands for key=value
            if has_inline:
                raise ConfigError(f"command line: flag --{flag} takes no value (it sets {shorthands[name]})")
            overrides.append(parse_override(cls, shorthands[name]))
            continue
        tp = str if name == "config" else key_type(cls, shorthands[name])
        words, i = ([inline], i) if has_inline else _flag_words(args, i, flag, tp)
        if name == "config":
            user_config = words[0]
        else:
            overrides.append((shorthands[name], cli_value(words, tp)))
    layers = [path for path in (default_config, user_config) if path is not None]
    cfg = build_config(cls, layers, overrides)
    if resolve is not None:
        cfg = resolve(cfg)
    if wants_help:
        print(help_text(cfg, shorthands, description, positional))
        raise SystemExit(0)
    source = user_config if user_config is not None else default_config
    return cfg, None if source is None else str(source)


def _positional_keys(positional: str | Sequence[str] | None) -> tuple[str, ...]:
    if positional is None:
        return ()
    return (positional,) if isinstance(positional, str) else tuple(positional)


def require_words(cfg: Any, keys: Sequence[str]) -> None:
    """Refuse a command whose positional words ``keys`` are not all given, naming the missing ones."""
    missing = [key.upper() for key in keys if not getattr(cfg, key)]
    if missing:
        usage = " ".join(key.upper() for key in keys)
        raise ConfigError(f"command line: {usage} expected; missing {', '.join(missing)}; see --help")


def require_one_of(cfg: Any, keys: Sequence[str], target: str, target_given: bool) -> None:
    """Refuse a tool's command unless its ``target`` is given and exactly one of the flags ``keys`` is set
    (a tool with several sources, e.g. a shard builder's ``--beir`` / ``--jsonl`` / ``--bundled``)."""
    given = [f"--{key.replace('_', '-')}" for key in keys if getattr(cfg, key)]
    if not target_given or len(given) != 1:
        choices = ", ".join(f"--{key.replace('_', '-')}" for key in keys)
        found = f"got {', '.join(given)}" if given else "got none"
        raise ConfigError(f"command line: give {target} and exactly one of {choices} ({found}); see --help")


def field_flags(cls: type) -> dict[str, str]:
    """Every top-level key of a flat config as its own flag (``--top-k`` sets ``top_k``)."""
    return {f.name: f.name for f in dataclasses.fields(cls)}


def help_text(
    cfg: Any, shorthands: Mapping[str, str], description: str = "", positional: str | Sequence[str] | None = None
) -> str:
    """``--help``: the description, the flags with the key each sets (and how many values it takes),
    then every key with its value in ``cfg`` (the config the command's arguments resolve to)."""
    cls = type(cfg)

    def takes(key: str) -> str:
        if "=" in key:
            return "  (no value)"
        tp = key_type(cls, key)
        return "  (no value)" if _is_switch(tp) else "  (one or more values)" if list_types(tp) else ""

    lines = [inspect.cleandoc(description), ""] if description else []
    first = "".join(f"{key.upper()} " for key in _positional_keys(positional))
    lines += [f"usage: {first}[--config PATH] [--FLAG VALUE ...] [key=value ...]", "", "flags:"]
    lines += [f"  --{flag.replace('_', '-'):<22} sets {key}{takes(key)}" for flag, key in shorthands.items()]
    return "\n".join(lines + ["", config_keys_text(cfg)])
