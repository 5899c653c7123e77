"""An input file as a checkpoint knows it: what it is (resolved path, device and inode) and what
it holds (its size and a SHA-256 of its first bytes), so a resume finds it under any spelling
and notices when the file behind the name changed (rotated, rewritten, cut shorter)."""

from __future__ import annotations

import os
import stat
from typing import Any

__all__ = ["HEAD_BYTES", "identify", "change", "same_input"]

#: How much of the start of an input is fingerprinted (its first line or lines, usually).
HEAD_BYTES = 4096


def identify(path: str) -> dict[str, Any] | None:
    """The identity of the regular file at ``path`` (None for a pipe, FIFO or missing file).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "in.jsonl")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b'{"a": 1, "y": 1}\\n')
    >>> sorted(identify(path))
    ['dev', 'head_bytes', 'head_sha256', 'ino', 'path', 'size']

    """
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    return {
        "path": os.path.realpath(path),
        "dev": st.st_dev,
        "ino": st.st_ino,
        "size": st.st_size,
        "head_bytes": len(head),
        "head_sha256": _sha256(head),
    }


def same_input(saved: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether ``now`` is the file ``saved`` describes by place: one device and inode, or one
    resolved path (a file replaced under its name is found, then :func:`change` tells)."""
    return (saved["dev"], saved["ino"]) == (now["dev"], now["ino"]) or saved["path"] == now["path"]


def change(saved: dict[str, Any], path: str) -> str | None:
    """How the file at ``path`` differs from the ``saved`` one in what it holds, or None."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            head = f.read(saved["head_bytes"])
    except OSError as e:
        return f"cannot be read: {e.strerror}"
    if st.st_size < saved["size"]:
        return f"it is shorter than the checkpoint saw ({st.st_size} < {saved['size']} bytes)"
    if _sha256(head) != saved["head_sha256"]:
        return f"its first {saved['head_bytes']} bytes are not the ones the checkpoint saw"
    return None


def valid(entry: Any) -> bool:
    """Whether a saved identity has the fields and types :func:`identify` gives."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        return False
    counts = ("dev", "ino", "size", "head_bytes")
    if not all(type(entry.get(k)) is int and entry[k] >= 0 for k in counts):
        return False
    digest = entry.get("head_sha256")
    return isinstance(digest, str) and len(digest) == 64 and entry["head_bytes"] <= HEAD_BYTES


def _sha256(data: bytes) -> str:
    import hashlib  # when a checkpoint is made or checked: a run without one starts without it

    return hashlib.sha256(data).hexdigest()
