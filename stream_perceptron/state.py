"""Model state on disk: versioned JSON, written atomically (temp file, fsync, rename)."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import stat
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from stream_perceptron.errors import StateError

__all__ = [
    "MAX_COUNT",
    "MAX_STATE_BYTES",
    "NonFiniteNumberError",
    "count",
    "finite_float",
    "json_key",
    "keyed",
    "no_constant",
    "number",
    "read_json",
    "short",
    "unique_keys",
    "write_json",
    "write_json_atomic",
]

#: A state file larger than this is refused unread (a model of millions of features is far
#: smaller; anything bigger is not one of ours, and would be read whole into memory).
MAX_STATE_BYTES = 512 << 20
#: The largest count a state holds (examples, mistakes, offsets, sizes): 2**63 - 1, what the C
#: tiers and Kafka's offsets hold; a larger one is not ours (and overflows them).
MAX_COUNT = 2**63 - 1


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` so that readers see the old file or the new, never half.

    The JSON goes to a temporary file in the same directory, is fsynced, renamed over ``path``,
    and the directory is fsynced so the rename itself survives a crash.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "state.json"
    >>> write_json_atomic(target, {"schema_version": 1})
    >>> read_json(target)
    {'schema_version': 1}

    """
    import tempfile  # here: with shutil, bz2 and lzma, 2 ms of every command's start

    # Through a symlink to its target: the link stays, the file it names is replaced.
    target = Path(os.path.realpath(path))
    directory = target.parent if str(target.parent) else Path(".")
    data = json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """:func:`write_json_atomic` for a regular file (or a new one); anything else (a pipe, a
    FIFO, ``/dev/stdout``) is written to directly, since renaming over it would replace it."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if regular:
        write_json_atomic(path, obj)
        return
    with open(path, "wb") as f:
        f.write(json.dumps(obj, allow_nan=False).encode() + b"\n")


# A ``\uD800``-``\uDFFF`` escape: how a lone surrogate (not text) gets into a JSON file.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def read_json(path: str | os.PathLike[str], limit: int = MAX_STATE_BYTES) -> Any:
    """Read a JSON file written by :func:`write_json_atomic`, with a clear error if it is not.

    Only a regular file of at most ``limit`` bytes is read (never ``/dev/zero``, a FIFO, or a
    file that would fill the memory), and only text: a string holding a lone surrogate (which
    the parsers refuse in a record) is refused in a state file too. So are what no writer of
    ours writes: ``NaN``, ``Infinity`` and numbers past a float's range (the message names
    where), and a key twice in one object (json would keep the last one silently).
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading would wait for a writer (a regular file
        # reads as ever); the file type is checked before any read
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise StateError(f"the state file {path} is not a regular file")
            if st.st_size > limit:
                raise StateError(
                    f"the state file {path} has {st.st_size} bytes, more than the {limit} a "
                    "state file may have"
                )
            data = f.read(limit + 1)
        if len(data) > limit:
            raise StateError(f"the state file {path} grew past {limit} bytes while read")
        obj = json.loads(data, parse_float=finite_float, parse_constant=no_constant,
                         object_pairs_hook=unique_keys)  # fmt: skip
        if _SURROGATE_ESCAPE.search(data) is not None:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")  # a lone surrogate raises
        return obj
    except NonFiniteNumberError as e:
        raise StateError(f"the state file {path}: {_where_not_finite(data, e.text)}") from None
    except _DuplicateKeyError as e:
        raise StateError(f"the state file {path} is refused: {e}") from None
    except StateError:
        raise
    except UnicodeEncodeError as e:
        raise StateError(
            f"the state file {path} holds a lone surrogate ({e.object[e.start:e.end]!a}), "
            "which is not text: no exporter could write it"
        ) from None
    except FileNotFoundError as e:
        raise StateError(f"no state file at {path}") from e
    except RecursionError as e:
        raise StateError(f"cannot read the state file {path}: nested too deeply") from e
    except (OSError, ValueError) as e:
        raise StateError(f"cannot read the state file {path}: {e}") from e


# -- what a state file holds: checked field by field ------------------------------------------
class NonFiniteNumberError(StateError):
    """A JSON number that is not a finite float: ``NaN``, ``Infinity``, ``-Infinity`` (which
    Python's json reads, and no writer of ours writes) or one past a float's range (``1e400``,
    which json would read as an infinity)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"the number {text[:40]} is not finite")
        self.text = text[:40]


class _DuplicateKeyError(StateError):
    """A key twice in one JSON object (json would keep the last one silently)."""


def finite_float(text: str) -> float:
    """json's ``parse_float`` hook: the number, or :class:`NonFiniteNumberError`."""
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumberError(text)
    return value


def no_constant(name: str) -> float:
    """json's ``parse_constant`` hook: ``NaN``, ``Infinity`` and ``-Infinity`` refused."""
    raise NonFiniteNumberError(name)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's ``object_pairs_hook``: an object, each key once."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(f"the key {short(key)} appears twice in one object")
            seen.add(key)
    return obj


def _where_not_finite(data: bytes, text: str) -> str:
    """Where the first number that is not finite is (read again, non-finite numbers allowed:
    only after a refusal), for a message that names the field."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        obj = None
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where or 'the top'} is {text}, not a finite number"
        if isinstance(value, dict):
            stack += reversed([(_path(where, k), v) for k, v in value.items()])
        elif isinstance(value, list):
            stack += reversed([(f"{where}[{i}]", v) for i, v in enumerate(value)])
    return f"the number {text} is not finite"


def _path(where: str, key: str) -> str:
    if key.isidentifier():
        return f"{where}.{key}" if where else key
    return f"{where}[{key!r}]"


def short(value: Any) -> str:
    """``repr(value)``, at most 60 characters (a message names a value, never prints a file)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def number(value: Any, field: str, low: float = -math.inf, high: float = math.inf) -> float:
    """``value`` (the field ``field`` of a state) as a float: a number, not a bool or a string,
    finite, from ``low`` to ``high``; :class:`StateError` naming the field otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise StateError(f"{field} is {short(value)}, not a number")
    try:
        f = float(value)
    except OverflowError:  # an int past float's range
        raise StateError(f"{field} is {short(value)}, past a float's range") from None
    if not math.isfinite(f):
        raise StateError(f"{field} is {f}, not a finite number")
    if not low <= f <= high:
        raise StateError(f"{field} is {f!r}, outside {low:g} to {high:g}")
    return f


def count(
    value: Any, field: str, high: int = MAX_COUNT, bound: str = "", low: int = 0
) -> int:
    """``value`` as a count from ``low`` to ``high`` (``bound``: what ``high`` is, for the
    message); :class:`StateError` naming the field otherwise.

    >>> count(5000, "n_mistakes", 3000, "n_seen")
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.StateError: n_mistakes is 5000, not a count from 0 to 3000 (n_seen)
    """
    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        n = int(value)
        if low <= n <= high:
            return n
    what = f" ({bound})" if bound else ""
    raise StateError(f"{field} is {short(value)}, not a count from {low} to {high}{what}")


def json_key(value: Any, field: str) -> Hashable:
    """A feature name or a label read back: a JSON scalar (a string, number, bool or null)."""
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise StateError(f"{field} holds the key {short(value)}, not a JSON scalar")


_NUMBER_TYPES = frozenset((float, int))


def keyed(
    items: Any, field: str, check: Callable[[Any, str], Any] = number
) -> dict[Hashable, Any]:
    """``[[key, value], ...]`` (:func:`~stream_perceptron.learners._state.pairs`) as a dict:
    a list of pairs, each key a JSON scalar and there once, each value passed by ``check``
    (default: a finite number, as a float). :class:`StateError` naming the field otherwise."""
    if check is number and isinstance(items, list):  # a model's weights: in bulk first
        try:
            out = dict(items)
            values = list(out.values())
            if (len(out) == len(items) and set(map(type, values)) <= _NUMBER_TYPES
                    and all(map(math.isfinite, values))):  # fmt: skip
                if int in set(map(type, values)):
                    out = {k: float(v) for k, v in out.items()}
                return out
        except (TypeError, ValueError, OverflowError):
            pass  # the loop below names what is wrong
    if not isinstance(items, list):
        raise StateError(f"{field} is {short(items)}, not a list of [key, value] pairs")
    checked: dict[Hashable, Any] = {}
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise StateError(f"{field} holds {short(item)}, not a [key, value] pair")
        key = json_key(item[0], field)
        if key in checked:
            raise StateError(f"{field} has the key {short(key)} twice")
        checked[key] = check(item[1], f"{field}[{key!r}]")
    return checked
