"""Model state on disk: versioned JSON, written atomically (temp file, fsync, rename)."""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from stream_perceptron.errors import StateError

__all__ = ["MAX_STATE_BYTES", "read_json", "write_json", "write_json_atomic"]

#: A state file larger than this is refused unread (a model of millions of features is far
#: smaller; anything bigger is not one of ours, and would be read whole into memory).
MAX_STATE_BYTES = 512 << 20


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
    the parsers refuse in a record) is refused in a state file too.
    """
    try:
        with open(path, "rb") as f:
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
        obj = json.loads(data)
        if _SURROGATE_ESCAPE.search(data) is not None:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")  # a lone surrogate raises
        return obj
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
