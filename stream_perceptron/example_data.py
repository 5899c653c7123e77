"""Bundled example data: River's data sets written out as CSV, JSON lines or libsvm."""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from river import datasets

__all__ = ["DATASETS", "DELAYED_KEY", "write_dataset"]

#: The key field of ``--delayed`` data (``run --join-key id``).
DELAYED_KEY = "id"
#: ``--delayed``: an outcome comes up to this many events after its event.
MAX_DELAY = 100

DATASETS: dict[str, Callable[[], Iterable[tuple[dict, Any]]]] = {
    "phishing": datasets.Phishing,
    "image-segments": datasets.ImageSegments,
    "bananas": datasets.Bananas,
}


def _label(y: Any) -> Any:
    return int(y) if isinstance(y, bool) else y


def write_dataset(
    name: str, fmt: str, out: TextIO, label: str = "y", delayed: bool = False, seed: int = 0
) -> int:
    """Write data set ``name`` to ``out`` in format ``fmt``; return the number of rows.

    ``delayed``: each row as an *event* (an ``id``, its features, no label) and, 0 to
    :data:`MAX_DELAY` events later (random, seeded by ``seed``), its *outcome* (the ``id`` and
    the label), for ``run --join-key id`` (csv and jsonl).

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> write_dataset("phishing", "csv", buf)
    1250
    >>> buf.getvalue().splitlines()[0]
    'empty_server_form_handler,popup_window,https,request_from_other_domain,anchor_from_other_domain,is_popular,long_url,age_of_domain,ip_in_url,y'
    >>> buf = io.StringIO()
    >>> write_dataset("phishing", "jsonl", buf, delayed=True)
    1250
    >>> lines = buf.getvalue().splitlines()
    >>> len(lines), lines[0][:40], sum(line.endswith('"y": 1}') for line in lines) > 0
    (2500, '{"id": "e0", "empty_server_form_handler"', True)

    """
    if delayed:
        return _write_delayed(name, fmt, out, label, random.Random(seed))
    rows: Iterator[tuple[dict, Any]] = iter(DATASETS[name]())
    n = 0
    features: list[str] | None = None
    for x, y in rows:
        if fmt == "csv":
            if features is None:
                features = list(x)
                out.write(",".join([*features, label]) + "\n")
            cells = [repr(float(x[f])) if f in x else "" for f in features]
            out.write(",".join([*cells, str(_label(y))]) + "\n")
        elif fmt == "jsonl":
            out.write(json.dumps({**{k: float(v) for k, v in x.items()}, label: _label(y)}) + "\n")
        elif fmt == "libsvm":
            names = list(x)
            tokens = [f"{j + 1}:{float(x[k])!r}" for j, k in enumerate(names)]
            out.write(" ".join([str(_label(y)).replace(" ", "_"), *tokens]) + "\n")
        else:
            raise ValueError(f"unknown format {fmt!r}")
        n += 1
    return n


def _write_delayed(name: str, fmt: str, out: TextIO, label: str, rng: random.Random) -> int:
    """:func:`write_dataset` with ``delayed``: events, and their outcomes later."""
    if fmt not in ("csv", "jsonl"):
        raise ValueError(f"--delayed data needs named fields: csv or jsonl, not {fmt!r}")
    due: list[tuple[int, int, Any]] = []  # (event index it comes after, event index, label)
    features: list[str] | None = None

    def outcome(i: int, y: Any) -> str:
        if fmt == "jsonl":
            return json.dumps({DELAYED_KEY: f"e{i}", label: _label(y)}) + "\n"
        assert features is not None
        return ",".join([f"e{i}", *[""] * len(features), str(_label(y))]) + "\n"

    n = 0
    for i, (x, y) in enumerate(DATASETS[name]()):
        if fmt == "csv":
            if features is None:
                features = list(x)
                out.write(",".join([DELAYED_KEY, *features, label]) + "\n")
            cells = [repr(float(x[f])) if f in x else "" for f in features]
            out.write(",".join([f"e{i}", *cells, ""]) + "\n")
        else:
            out.write(json.dumps({DELAYED_KEY: f"e{i}", **{k: float(v) for k, v in x.items()}})
                      + "\n")  # fmt: skip
        heapq.heappush(due, (i + rng.randint(0, MAX_DELAY), i, y))
        while due and due[0][0] <= i:
            _, j, label_y = heapq.heappop(due)
            out.write(outcome(j, label_y))
        n += 1
    while due:
        _, j, label_y = heapq.heappop(due)
        out.write(outcome(j, label_y))
    return n
