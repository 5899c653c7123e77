"""Every file and folder docs/ARCHITECTURE.md names exists (and those the C tier's loader names
in its docstring, ``stream_perceptron/native/__init__.py``).

A name with a folder (``sharing/view.py``, ``connectors/kafka/``) is found from the repository
root or from the package folder it is written under (``stream_perceptron/``); a bare file name
(``base.py``, ``_dense.c``) must be some file of the tree. Broke it to watch it fail:
``learners/_binary_kernel.py`` renamed ``learners/_binary_glue.py`` in ARCHITECTURE.md fails it
(not found), and so does the former ``:mod:`.scan``` module's path, ``native/scan.py``, in the
native docstring.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = (REPO, REPO / "stream_perceptron")
_EXT = r"(?:py|pyi|c|md|sh|yml|yaml|json|toml|html|txt)"
#: a file name with its extension, or a folder name ending in / inside backquotes
PATH = re.compile(rf"(?<![\w./-])((?:[\w.-]+/)*[\w.-]*\w\.{_EXT})(?![\w/])|`((?:[\w.-]+/)+)`")


def _tracked_names() -> set[str]:
    """The names of git's files and of the tree's others (built ones), hidden folders left out:
    walking them raced the session broker (``.kafka/data``), whose topic folders are deleted
    while the suite runs (a fresh clone's make test failed so, FileNotFoundError)."""
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    names = {Path(p).name for p in out.splitlines()}
    for _folder, dirs, files in os.walk(REPO):  # errors (a folder gone meanwhile) skipped
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        names.update(dirs)
        names.update(files)
    return names


def named_paths(text: str) -> set[str]:
    """The file and folder names a text names (see the module docstring)."""
    found = set()
    for m in PATH.finditer(text):
        name = m[1] or m[2]
        if not name.startswith(("http", "www.")):
            found.add(name)
    return found


def missing(text: str) -> list[str]:
    tracked = _tracked_names()
    gone = []
    for name in sorted(named_paths(text)):
        if "/" in name.rstrip("/"):
            ok = any((root / name).exists() for root in ROOTS)
        elif name.endswith("/"):
            ok = any((root / name).is_dir() for root in ROOTS)
        else:
            ok = name in tracked
        if not ok:
            gone.append(name)
    return gone


def test_architecture_names_only_files_that_exist():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert len(named_paths(text)) > 50  # the check sees the document's names
    assert missing(text) == []


def test_the_c_tier_loader_names_only_files_that_exist():
    import stream_perceptron.native as native

    assert native.__doc__ is not None
    assert missing(native.__doc__) == []
