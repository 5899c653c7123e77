"""The files a run reads and writes, identified by what they are, not by how they are spelled.

Two roles on one file (``--input X --predictions X``, ``--checkpoint F --dead-letter F``, or the
same file spelled ``out/p.jsonl`` and ``./out/p.jsonl``) would destroy one of them, so they are
refused before anything is opened for writing. A file is the same as another when both exist
and have the same device and inode (hard links and symlinks included), or when neither exists
yet and both resolve to the same absolute path.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

__all__ = [
    "FileRole",
    "conflicts",
    "file_identity",
    "is_regular_or_absent",
    "same_file",
    "state_file_problem",
]

# Many roles may share these: writing to them destroys nothing.
_SHAREABLE = {os.path.realpath(os.devnull)}


@dataclass(frozen=True)
class FileRole:
    """A file given on the command line: the flag that named it and the path as given."""

    flag: str
    path: str


def file_identity(path: str) -> tuple[object, ...]:
    """What ``path`` is: ``("dev", device, inode)`` when it exists, else its absolute real path.

    ``"-"`` is stdin or stdout (the caller tells which by the role).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> file_identity(os.path.join(d, "a")) == file_identity(os.path.join(d, ".", "a"))
    True

    """
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("dev", st.st_dev, st.st_ino)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (see :func:`file_identity`)."""
    return file_identity(a) == file_identity(b)


def conflicts(roles: list[FileRole]) -> list[tuple[FileRole, FileRole]]:
    """Pairs of roles that name the same file (stdout, ``"-"``, counts as one file for the
    outputs; :data:`os.devnull` may be shared).

    Examples
    --------
    >>> [(a.flag, b.flag) for a, b in conflicts(
    ...     [FileRole("--predictions", "-"), FileRole("--dead-letter", "-")])]
    [('--predictions', '--dead-letter')]

    """
    seen: dict[tuple[object, ...], FileRole] = {}
    found = []
    for role in roles:
        if role.path == "-":
            key: tuple[object, ...] = ("stdin",) if role.flag == "--input" else ("stdout",)
        elif os.path.realpath(role.path) in _SHAREABLE:
            continue
        else:
            key = file_identity(role.path)
        if key in seen:
            found.append((seen[key], role))
        else:
            seen[key] = role
    return found


def is_regular_or_absent(path: str) -> bool:
    """Whether ``path`` (symlinks followed) is a regular file or does not exist yet."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def state_file_problem(path: str, *, replace: bool) -> str | None:
    """Why a state file (``run --checkpoint``, ``pull-model --output``) cannot be written at
    ``path``, or None: the one check every command that writes one makes before it starts.
    Only a regular file is replaced (by a rename, so a device, FIFO or directory would be
    destroyed), and an existing one only when the user said so (``replace``: ``--resume``,
    ``--fresh``, ``--force``).

    Examples
    --------
    >>> state_file_problem(os.devnull, replace=True)
    'is not a regular file'

    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "exists" if os.path.islink(path) and not replace else None  # a dangling link
    except OSError as e:
        return f"cannot be checked: {e.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if not replace:
        return "exists"
    return None
