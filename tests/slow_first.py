"""The order in which ``make test``'s processes (pytest-xdist, ``--dist worksteal``) meet the
tests: the longest ones first, spread over the processes.

Worksteal gives each of the N processes one contiguous share of the collected items (the
first len/N to the first process, and so on) and later moves items from the end of the
longest queue to an idle process. A test of a minute that sits late in its share starts when
the others are nearly done and holds the end of the run alone: a fresh clone's ``make test``
ended with 40 s at 12-53 % of the CPU. So the tests measured as the longest
(``slow_tests.txt``, made from a run's ``--durations`` by ``scripts/slow_tests.py``) are
dealt, longest first, each to the share with the least such time so far, and put at the head
of their share; every other item keeps its place (a stable order). A name in the file that is
no longer collected is ignored; a new long test runs where it is collected until the file is
made again.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

#: ``seconds nodeid`` lines, the longest tests of a measured ``make test`` run
SLOW_TESTS = Path(__file__).resolve().parent / "slow_tests.txt"

T = TypeVar("T")


def read_slow_tests(path: Path = SLOW_TESTS) -> dict[str, float]:
    """nodeid -> measured seconds (blank lines and ``#`` comments skipped)."""
    seconds: dict[str, float] = {}
    if not path.exists():
        return seconds
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        took, _, nodeid = line.partition(" ")
        seconds[nodeid.strip()] = float(took)
    return seconds


def share_sizes(n_items: int, workers: int) -> list[int]:
    """How many items worksteal's first distribution gives each process, in order (each idle
    process gets the pending items divided by the processes still to serve)."""
    sizes, left = [], n_items
    for i in range(workers):
        size = left // (workers - i)
        sizes.append(size)
        left -= size
    return sizes


def spread_slow_first(
    items: Sequence[T], nodeids: Sequence[str], slow: dict[str, float], workers: int
) -> list[T]:
    """``items`` reordered: the slow ones (``slow``: nodeid -> seconds) dealt longest first to
    the share with the least slow time, at the head of that share; the rest in their order."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    chosen = sorted(
        (i for i, nodeid in enumerate(nodeids) if nodeid in slow),
        key=lambda i: (-slow[nodeids[i]], i),
    )
    if not chosen:
        return list(items)
    heads: list[list[int]] = [[] for _ in range(workers)]
    loads = [(0.0, share) for share in range(workers)]
    for i in chosen:
        load, share = heapq.heappop(loads)
        heads[share].append(i)
        heapq.heappush(loads, (load + slow[nodeids[i]], share))
    taken = set(chosen)
    rest = [i for i in range(len(items)) if i not in taken]
    order: list[int] = []
    for share, size in enumerate(share_sizes(len(items), workers)):
        head = heads[share][:size]
        rest = heads[share][size:] + rest  # a share too small for its head: the rest goes on
        order += head
        take = size - len(head)
        order += rest[:take]
        rest = rest[take:]
    order += rest
    return [items[i] for i in order]
