"""Model state on disk: versioned JSON, written atomically (temp file, fsync, rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from stream_perceptron.errors import StateError

__all__ = ["write_json_atomic", "read_json"]


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
    target = Path(path)
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


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file written by :func:`write_json_atomic`, with a clear error if it is not."""
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise StateError(f"no state file at {path}") from e
    except (OSError, ValueError) as e:
        raise StateError(f"cannot read the state file {path}: {e}") from e
