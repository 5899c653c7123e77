#!/usr/bin/env python3
"""Compile the venv's installed packages to bytecode on every core, after
``pip install --no-compile``.

pip compiles what it installs file by file on one core: 18 of the 39 s of CPU that
``make test``'s install takes (7,600 files of mkdocs, pandas, scikit-learn, ...), while the
machine's other core waits. Here the packages are dealt, largest first, into one group per
core and each group compiled by its own ``compileall`` process, the packages' test suites
left out. As pip does, a file that does not compile (a package's Python 2 examples, a test
data file) is left to the interpreter and is not an error.

Usage: ``.venv/bin/python scripts/compile_bytecode.py [SITE]`` (SITE: the interpreter's
site-packages by default).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

#: the packages' own test suites (pandas/tests, sklearn/*/tests, ...: 2,150 of the 7,600 files,
#: 35 of 119 MB), which nothing here imports; anything imported is compiled when first imported
SKIPPED = r"[/\\]tests?[/\\]"


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size if path.suffix == ".py" else 0
    return sum(p.stat().st_size for p in path.rglob("*.py") if p.is_file())


def groups(site: Path, n: int) -> list[list[Path]]:
    """The site's top-level entries with Python files, dealt largest first to the group with
    the fewest bytes so far."""
    entries = [(s, p) for p in sorted(site.iterdir()) if (s := _size(p)) > 0]
    entries.sort(key=lambda e: -e[0])
    dealt: list[list[Path]] = [[] for _ in range(n)]
    loads = [0] * n
    for size, path in entries:
        k = loads.index(min(loads))
        dealt[k].append(path)
        loads[k] += size
    return [g for g in dealt if g]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0]) if args else Path(sysconfig.get_path("purelib"))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "compileall", "-q", "-q", "-x", SKIPPED, *map(str, group)],
            stdout=subprocess.DEVNULL,
        )
        for group in groups(site, max(1, cores or 1))
    ]
    for proc in procs:
        proc.wait()  # 1 when some file did not compile: as pip, not an error
    return 0


if __name__ == "__main__":
    sys.exit(main())
