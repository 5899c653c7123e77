#!/usr/bin/env python3
"""Write ``tests/slow_tests.txt`` from the ``--durations`` table of a ``make test`` log: the
tests that ``make test`` starts first, spread over its processes (``tests/slow_first.py``).

Usage: ``make test 2>&1 | tee test.log; python3 scripts/slow_tests.py test.log``
(``--min-seconds`` to choose which are slow: 25 by default). A test's phases (set-up, call,
tear-down) are added up.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S+)\s*$")
HEADER = """\
# The longest tests of a measured `make test` run (seconds, then the test), which it starts
# first, spread over its processes (tests/slow_first.py). Made by scripts/slow_tests.py from
# that run's --durations table: {source}
"""


def durations(log: str) -> dict[str, float]:
    """nodeid -> seconds of its phases in the log's ``slowest N durations`` table."""
    _, found, table = log.partition("slowest ")
    if not found:
        raise SystemExit("no '--durations' table in the log (make test prints one)")
    seconds: dict[str, float] = defaultdict(float)
    for line in table.splitlines()[1:]:
        match = ROW.match(line)
        if match is None:
            if line.startswith("="):
                break
            continue
        seconds[match.group(2)] += float(match.group(1))
    return dict(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="a make test log with its --durations table")
    parser.add_argument("--min-seconds", type=float, default=25.0, help="slow from (25)")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "slow_tests.txt")
    args = parser.parse_args(argv)
    slow = {k: v for k, v in durations(args.log.read_text(errors="replace")).items()
            if v >= args.min_seconds}  # fmt: skip
    lines = [HEADER.format(source=args.log.name)]
    lines += [f"{s:.1f} {nodeid}\n" for nodeid, s in sorted(slow.items(), key=lambda e: -e[1])]
    args.out.write_text("".join(lines), encoding="utf-8")
    print(f"{len(slow)} tests of {args.min_seconds:g} s or more -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
