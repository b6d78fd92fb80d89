"""One loader for every configuration dataclass, driven by its fields.

    @dataclass(frozen=True)
    class TrainConfig:
        steps: int = option(200, minimum=1, help="training steps")
        model: str = option("mlp", choices=("mlp", "cnn"))

    load(TrainConfig, {"steps": 50}, "run.yaml", "train")      # from a YAML/JSON mapping
    add_options(parser, TrainConfig); from_options(TrainConfig, parser.parse_args())  # from a command line

A field's type says what it accepts: bool, int, float (an int is taken too), str, `X | None`,
`tuple[X, ...]`, `dict[str, X]`, or a nested config dataclass. Its metadata (`option(...)`) says
the rest: `choices`, `minimum`/`maximum`, `help`, `flag` (the command-line option, default
`--field-name`; a nested dataclass's fields are options of the same command), `parse` (text ->
value, for items given as strings such as `h2=0.2`), `repeat` (the option may be given several
times), `timer` (a protocol timer or delay in seconds: a time-scaled run multiplies it, see
testbed.timescale). Cross-field rules live in the dataclass's `__post_init__`, which raises FieldProblem; the
loader turns every problem into one ConfigError line that names the file (or option) and field.
"""
from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

_MISSING = dataclasses.MISSING


class ConfigError(ValueError):
    """A configuration that cannot be used: one line naming the file or option and the field."""

    exit_code = 2


class FieldProblem(ValueError):
    """What a config dataclass raises for a bad value: the field (a dotted path) and the problem."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"field '{field}': {problem}")
        self.field = field
        self.problem = problem


def option(default: Any = _MISSING, *, default_factory: Any = _MISSING, help: str = "",  # noqa: A002 - argparse's word
           choices: tuple | None = None, minimum: float | None = None, maximum: float | None = None,
           flag: str | None = None, parse: Callable[[str], Any] | None = None, repeat: bool = False,
           cli: bool = True, timer: bool = False) -> Any:
    """A dataclass field with what the loader needs to read and check it (see the module docstring)."""
    meta = {"help": help, "choices": choices, "minimum": minimum, "maximum": maximum, "flag": flag, "parse": parse,
            "repeat": repeat, "cli": cli, "timer": timer}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def load(cls: type, data: Any, source: str, where: str = "") -> Any:
    """An instance of config dataclass `cls` from a mapping; ConfigError names `source` and the field."""
    try:
        return _build(cls, data, where)
    except FieldProblem as p:
        raise ConfigError(f"{source}: field '{p.field}': {p.problem}") from None


def to_dict(obj: Any) -> Any:
    """The JSON form of a config (what `load` reads back): tuples become lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj if obj is None or isinstance(obj, (bool, int, float, str)) else str(obj)


def flat_dict(obj: Any) -> dict[str, Any]:
    """Every leaf field of a config by its own name (nested configs flattened), as JSON values: the
    shape of a command line, for results files. Leaf names are unique in a composed config."""
    out: dict[str, Any] = {}
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out.update(flat_dict(value) if dataclasses.is_dataclass(hints[f.name]) else {f.name: to_dict(value)})
    return out


# ---------------------------------------------------------------------------- mappings

def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where and key else where or key


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise FieldProblem(where, f"expected a mapping, got {_kind(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in data if k not in fields)
    if unknown:
        raise FieldProblem(_join(where, unknown[0]), f"unknown (known: {', '.join(fields)})")
    for name, f in fields.items():
        if name not in data and f.default is _MISSING and f.default_factory is _MISSING:
            raise FieldProblem(_join(where, name), "missing")
    hints = _hints(cls)
    values = {name: _value(data[name], hints[name], f.metadata, _join(where, name))
              for name, f in fields.items() if name in data}
    return _construct(cls, values, where)


def _construct(cls: type, values: dict, where: str) -> Any:
    """cls(**values); a FieldProblem from its __post_init__ gets `where` in front of its field."""
    try:
        return cls(**values)
    except FieldProblem as p:
        raise FieldProblem(_join(where, p.field), p.problem) from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _value(value: Any, hint: Any, meta: Mapping, path: str) -> Any:
    """`value` as type `hint`, checked against the field's metadata; FieldProblem if it is not."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (hint,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(value, str) and meta.get("parse") and hint is not str and origin not in (tuple, dict):
        return _checked(_parse(meta["parse"], value, path), meta, path)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value, path)
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise FieldProblem(path, f"expected a list, got {_kind(value)}")
        item = {k: v for k, v in meta.items() if k != "choices"} | {"choices": meta.get("choices")}
        return tuple(_value(v, args[0], item, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if isinstance(value, (list, tuple)):  # command-line items "key=value"
            value = dict(_pair(v, path) for v in value)
        if not isinstance(value, Mapping):
            raise FieldProblem(path, f"expected a mapping, got {_kind(value)}")
        plain = {k: v for k, v in meta.items() if k != "parse"}
        return {str(k): _value(v, args[1], plain, f"{path}.{k}") for k, v in value.items()}
    return _checked(_scalar(value, hint, path), meta, path)


def _pair(text: Any, path: str) -> tuple[str, str]:
    key, sep, value = str(text).partition("=")
    if not sep or not key:
        raise FieldProblem(path, f"{text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()


def _parse(parse: Callable[[str], Any], text: str, path: str) -> Any:
    try:
        return parse(text)
    except FieldProblem as p:
        raise FieldProblem(path, p.problem) from None
    except ValueError as e:
        raise FieldProblem(path, str(e)) from None


def _scalar(value: Any, hint: Any, path: str) -> Any:
    if hint is bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    else:
        raise TypeError(f"config field {path}: type {hint} is not supported by config.fields")
    raise FieldProblem(path, f"expected {hint.__name__}, got {value!r}")


def _checked(value: Any, meta: Mapping, path: str) -> Any:
    choices, lo, hi = meta.get("choices"), meta.get("minimum"), meta.get("maximum")
    if choices is not None and value not in choices:
        raise FieldProblem(path, f"{value!r} is not one of {', '.join(map(str, choices))}")
    if lo is not None and value < lo:
        raise FieldProblem(path, f"must be >= {lo:g}, got {value}")
    if hi is not None and value > hi:
        raise FieldProblem(path, f"must be <= {hi:g}, got {value}")
    return value


# ---------------------------------------------------------------------------- command lines

def _leaves(cls: type, where: str = "") -> list[tuple[str, dataclasses.Field, Any]]:
    """(dotted path, field, type) of every command-line field of `cls`, nested dataclasses flattened."""
    out = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        hint, path = hints[f.name], _join(where, f.name)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            out += _leaves(hint, path)
        elif f.metadata.get("cli", True):
            out.append((path, f, hint))
    return out


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_options(parser: argparse.ArgumentParser, cls: type, defaults: Any = None) -> None:
    """One option per field of `cls` (nested dataclasses flattened); `defaults` (an instance) shows in --help."""
    defaults = defaults if defaults is not None else cls()
    for path, f, hint in _leaves(cls):
        current = _get(defaults, path)
        help_text = f.metadata.get("help", "")
        shown = current if not isinstance(current, (tuple, dict)) or current else None
        if shown is not None and not isinstance(current, bool):
            help_text = f"{help_text} (default: {shown})".strip()
        kwargs: dict[str, Any] = {"dest": path, "default": argparse.SUPPRESS, "help": help_text}
        if hint is bool:
            parser.add_argument(flag_of(f), action=argparse.BooleanOptionalAction, **kwargs)
            continue
        choices = f.metadata.get("choices")
        if choices is not None and typing.get_origin(hint) is None:
            kwargs["metavar"] = "{" + ",".join(map(str, choices)) + "}"
        else:
            kwargs["metavar"] = f.name.upper()
        if f.metadata.get("repeat"):
            kwargs["action"] = "append"
        parser.add_argument(flag_of(f), **kwargs)


def given_argv(cls: type, args: argparse.Namespace) -> list[str]:
    """The options of `cls` given on a command line (parsed by add_options' parser into `args`), as a
    command line again: what another process is started with to run the same config."""
    given, out = vars(args), []
    for path, f, hint in _leaves(cls):
        if path not in given:
            continue
        value, flag = given[path], flag_of(f)
        if hint is bool:
            out.append(flag if value else "--no-" + flag[2:])
            continue
        for item in value if isinstance(value, list) else [value]:
            out += [flag, str(item)]
    return out


def from_options(cls: type, args: argparse.Namespace, base: Any = None) -> Any:
    """`base` (default: cls()) with every option given on the command line applied and checked;
    ConfigError names the option."""
    base = base if base is not None else cls()
    given = vars(args)
    flags = {path: flag_of(f) for path, f, _ in _leaves(cls)}
    try:
        return _apply(base, {path: given[path] for path in flags if path in given}, "")
    except FieldProblem as p:
        raise ConfigError(f"{_flag_for(p.field, flags)}: {p.problem}") from None


def _flag_for(path: str, flags: dict[str, str]) -> str:
    """The option a field path (maybe of a list item or mapping key) came from."""
    for field_path in sorted(flags, key=len, reverse=True):
        if path == field_path or path.startswith((field_path + "[", field_path + ".")):
            return flags[field_path]
    return path


def _apply(obj: Any, given: dict[str, Any], where: str) -> Any:
    hints = _hints(type(obj))
    changes = {}
    for f in dataclasses.fields(obj):
        path = _join(where, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            inner = {p: v for p, v in given.items() if p.startswith(path + ".")}
            if inner:
                changes[f.name] = _apply(getattr(obj, f.name), inner, path)
        elif path in given:
            changes[f.name] = _value(given[path], hints[f.name], f.metadata, path)
    if not changes:
        return obj
    try:
        return dataclasses.replace(obj, **changes)
    except FieldProblem as p:
        raise FieldProblem(_join(where, p.field), p.problem) from None


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
