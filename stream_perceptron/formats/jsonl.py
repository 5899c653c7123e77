"""JSON lines: ``{"x": {...}, "y": label}`` or a flat object whose label field is ``label``."""

from __future__ import annotations

import json
import math
from typing import Any

from stream_perceptron.errors import RecordError
from stream_perceptron.formats.base import (
    EMPTY_RECORD,
    INVALID_JSON,
    NON_FINITE,
    NON_NUMERIC,
    NOT_AN_OBJECT,
    Example,
    decode_utf8,
)

__all__ = ["JsonLinesParser"]


def _reject_constant(name: str) -> float:
    raise RecordError(NON_FINITE, f"JSON constant {name}")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)


class JsonLinesParser:
    """One JSON object per line.

    In a flat object every field but the label is a feature: numbers as they are, booleans as
    0/1, strings as indicator features ``name=value`` (River's and Vowpal Wabbit's convention),
    null as missing. A label that is absent, null or ``""`` leaves the record unlabelled.

    Examples
    --------
    >>> p = JsonLinesParser("y")
    >>> p.parse(b'{"a": 1.5, "ok": true, "colour": "red", "gone": null, "y": "spam"}')
    Example(x={'a': 1.5, 'ok': 1.0, 'colour=red': 1.0}, y='spam')
    >>> p.parse(b'{"x": {"a": 2}, "y": 1}')
    Example(x={'a': 2.0}, y=1)

    """

    header_pending = False

    def __init__(self, label: str = "y") -> None:
        self.label = label

    def parse(self, value: bytes) -> Example:
        text = decode_utf8(value)
        if not text.strip():
            raise RecordError(EMPTY_RECORD, "empty line")
        try:
            obj = _decoder.decode(text)
        except json.JSONDecodeError as e:
            raise RecordError(INVALID_JSON, f"{e.msg} at column {e.colno}") from None
        if not isinstance(obj, dict):
            raise RecordError(NOT_AN_OBJECT, f"a JSON {type(obj).__name__}, not an object")
        nested = obj.get("x")
        if isinstance(nested, dict) and len(obj) <= 2 and (len(obj) == 1 or "y" in obj):
            return Example(_features(nested, None), _label(obj.get("y")))
        return Example(_features(obj, self.label), _label(obj.get(self.label)))


def _features(obj: dict[str, Any], label: str | None) -> dict[str, float]:
    x: dict[str, float] = {}
    for name, v in obj.items():
        if name == label or v is None:
            continue
        t = type(v)
        if t is float:
            if not math.isfinite(v):
                raise RecordError(NON_FINITE, f"feature {name!r} is {v}")
            x[name] = v
        elif t is int or t is bool:
            x[name] = float(v)
        elif t is str:
            x[f"{name}={v}"] = 1.0
        else:
            raise RecordError(NON_NUMERIC, f"feature {name!r} is a JSON {t.__name__}")
    return x


def _label(y: Any) -> Any:
    if y is None or y == "":
        return None
    if isinstance(y, (dict, list)):
        raise RecordError(NON_NUMERIC, f"label is a JSON {type(y).__name__}")
    if isinstance(y, float) and y.is_integer():
        return int(y)
    return y
