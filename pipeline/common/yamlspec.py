"""The one loader of the YAML settings files: gates/admission.yaml (config.py) and
candidate task files (admit.py).

A file is described by frozen dataclasses whose fields, made with `setting()`,
are the only keys allowed; `build` checks every value against its field's type
and bounds and raises ValueError naming the dotted key (`gates.peak_memory.max_p95_ratio`,
`targets[0].tier`); the callers prefix the file. Checked: unknown keys, missing
required keys, types, numbers that are not finite (.nan, .inf), bounds, enum
values (exactly, case included: `2G` is not `2g`), blank strings and URLs
without http:// or https://.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from pipeline.common.errors import ConfigError, yaml_problem


def setting(default: Any = dataclasses.MISSING, *, lo: float | None = None, hi: float | None = None,
            above: float | None = None, choices: tuple | None = None, url: bool = False, blank: bool = True,
            min_items: int = 0, help: str = "") -> Any:
    """A field; no default = required. `above` is an exclusive lower bound; `choices` of a list field
    applies to each item; `url`: '' or http(s)://...; `blank=False`: a string must not be empty."""
    return field(default=default, metadata={"lo": lo, "hi": hi, "above": above, "choices": choices, "url": url,
                                            "blank": blank, "min_items": min_items, "help": help})


# libyaml's parser when PyYAML was built with it (the wheels are): a config is read per command, ~12x faster
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """yaml.safe_load, on libyaml when present."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)


def read_yaml(path: Path, what: str) -> Any:
    """The parsed file; ConfigError (one line naming the file) when unreadable or not YAML."""
    try:
        return load_yaml(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot read the {what}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None


_TYPE_NAMES = {float: "a number", int: "a whole number", str: "a string", bool: "true or false"}


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(v: float) -> str:
    """As people write bounds: 1000000, not 1e+06; 0.5 stays 0.5."""
    return f"{v:.0f}" if float(v).is_integer() else f"{v:g}"


def _bounds(meta: dict) -> str:
    lo, hi = meta.get("lo"), meta.get("hi")
    if lo is not None and hi is not None:
        return f"between {_number(lo)} and {_number(hi)}"
    return f">= {_number(lo)}" if lo is not None else f"<= {_number(hi)}"


def scalar(tp: Any, value: Any, key: str, meta: dict) -> Any:
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{key} must be a finite number, got {show(value)}")
    elif tp is int and isinstance(value, int) and not isinstance(value, bool):
        pass
    elif tp in (str, bool) and isinstance(value, tp):
        if tp is str and not meta.get("blank", True) and not value.strip():
            raise ValueError(f"{key} must not be empty")
    else:
        raise ValueError(f"{key} must be {_TYPE_NAMES.get(tp, tp)}, got {show(value)}")
    choices = meta.get("choices")
    if choices and value not in choices:
        near = [c for c in choices if isinstance(c, str) and isinstance(value, str) and c.lower() == value.lower()]
        hint = f" (values are case-sensitive: {near[0]!r})" if near else ""
        raise ValueError(f"{key} must be one of {', '.join(map(str, choices))}, got {show(value)}{hint}")
    lo, hi, above = meta.get("lo"), meta.get("hi"), meta.get("above")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{key} must be {_bounds(meta)}, got {show(value)}")
    if above is not None and value <= above:
        raise ValueError(f"{key} must be > {above:g}, got {show(value)}")
    if meta.get("url") and value and not value.startswith(("http://", "https://")):
        raise ValueError(f"{key} must be an http:// or https:// URL (or '' for none), got {show(value)}")
    return value


def _value(tp: Any, value: Any, key: str, meta: dict, base: Any) -> Any:
    if dataclasses.is_dataclass(tp):
        return build(tp, value, key, base)
    if typing.get_origin(tp) is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{key} must be a list, got {show(value)}")
        if len(value) < meta.get("min_items", 0):
            raise ValueError(f"{key} must be a non-empty list, got {show(value)}")
        item = typing.get_args(tp)[0]
        item_meta = {"choices": meta.get("choices"), "blank": meta.get("blank", True)}
        return tuple(_value(item, v, f"{key}[{i}]", item_meta, None) for i, v in enumerate(value))
    if typing.get_origin(tp) is dict:  # name -> settings, e.g. costs.cloud.<task>
        if not isinstance(value, dict):
            raise ValueError(f"{key} must be a mapping of names to settings, got {show(value)}")
        item = typing.get_args(tp)[1]
        return {str(k): build(item, v, f"{key}.{k}") for k, v in value.items()}
    args = typing.get_args(tp)
    if type(None) in args:  # `X | None`: null means "not declared"
        if value is None:
            return None
        tp = next(a for a in args if a is not type(None))
    return scalar(tp, value, key, meta)


def build(cls: Any, raw: Any, prefix: str = "", base: Any = None, skip: tuple[str, ...] = ()) -> Any:
    """`raw` (a YAML mapping) as an instance of dataclass `cls`: over `base` when given (its values are
    the defaults), else over the field defaults, with fields without a default required.
    Fields named in `skip` are not settable from the file."""
    if not isinstance(raw, dict):
        raise ValueError(f"{prefix or 'the file'} must be a mapping, got {show(raw)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in skip}
    for key in raw:
        if key not in fields:
            dotted = f"{prefix}.{key}" if prefix else str(key)
            raise ValueError(f"unknown key {dotted!r}; expected one of: {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        if name not in raw:
            if base is None and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{dotted} is required ({f.metadata.get('help', '')})")
            continue
        nested_base = getattr(base, name) if base is not None else (
            f.default if f.default is not dataclasses.MISSING else None)
        values[name] = _value(hints[name], raw[name], dotted, dict(f.metadata), nested_base)
    return dataclasses.replace(base, **values) if base is not None else cls(**values)
