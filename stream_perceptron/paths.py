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
    "READ",
    "REPLACE",
    "STREAM",
    "WRITE",
    "FileRole",
    "conflicts",
    "file_flag_problem",
    "file_identity",
    "is_regular_or_absent",
    "path_problem",
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


# How a command uses a file it is given, for :func:`path_problem`.
READ = "read"  # read whole at the start: a regular file (a FIFO would block, /dev/zero not end)
STREAM = "stream"  # read as a stream (--input): a file, a FIFO or a device
WRITE = "write"  # written or appended to: a new file, or an existing file, FIFO or device
REPLACE = "replace"  # replaced by a rename (a state file): a new file or a regular one

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def path_problem(path: str, use: str) -> str | None:
    """Why ``path`` cannot be used as ``use`` (:data:`READ`, :data:`STREAM`, :data:`WRITE`,
    :data:`REPLACE`) says, or None; checked before anything is read, so that a run never learns
    its whole input to fail at the end. A dangling symlink is written through (its target
    created), never read.

    Examples
    --------
    >>> path_problem("", WRITE)
    'is an empty path, which names no file'
    >>> path_problem("/no/such/dir/model.json", REPLACE)
    'the directory /no/such/dir does not exist'
    >>> path_problem(os.devnull, READ)
    'is a character device, not a regular file'

    """
    if not path:
        return "is an empty path, which names no file"
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        return f"cannot be checked: {e.strerror}"
    if st is None:
        real = os.path.realpath(path)  # a dangling symlink: where it points
        link = os.path.islink(path)
        if use in (READ, STREAM):
            if link:
                return f"is a symbolic link to {real}, which does not exist"
            return "does not exist"
        parent = os.path.dirname(real)
        if os.path.isdir(parent):
            return None  # a new file (through a dangling symlink: its target)
        what = "is not a directory" if os.path.exists(parent) else "does not exist"
        if link:
            return f"is a symbolic link into {parent}, which {what}"
        return f"{parent} is not a directory" if os.path.exists(parent) else (
            f"the directory {parent} does not exist"
        )
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if use in (READ, REPLACE) and not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "a special file")
        return f"is {kind}, not a regular file"
    return None


def file_flag_problem(files: list[tuple[str, str | None, str]]) -> str | None:
    """The first of ``files``, ``(flag, path or None when not given, use)``, that cannot be
    used, as ``"--flag PATH: reason"``: the one check of every command's file flags.

    Examples
    --------
    >>> file_flag_problem([("--input", None, STREAM), ("--predictions", "", WRITE)])
    "--predictions '': is an empty path, which names no file"

    """
    for flag, path, use in files:
        problem = None if path is None else path_problem(path, use)
        if problem is not None:
            return f"{flag} {path or repr(path)}: {problem}"
    return None


def state_file_problem(path: str, *, replace: bool) -> str | None:
    """Why a state file (``run --checkpoint``, ``pull-model --output``) cannot be written at
    ``path``, or None: the one check every command that writes one makes before it starts.
    Only a regular file is replaced (by a rename, so a device, FIFO or directory would be
    destroyed), and an existing one only when the user said so (``replace``: ``--resume``,
    ``--fresh``, ``--force``).

    Examples
    --------
    >>> state_file_problem(os.devnull, replace=True)
    'is a character device, not a regular file'

    """
    problem = path_problem(path, REPLACE)
    if problem is None and not replace and os.path.exists(path):  # a dangling link is new
        return "exists"
    return problem
