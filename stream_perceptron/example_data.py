"""Bundled example data: River's data sets written out as CSV, JSON lines or libsvm."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from river import datasets

__all__ = ["DATASETS", "write_dataset"]

DATASETS: dict[str, Callable[[], Iterable[tuple[dict, Any]]]] = {
    "phishing": datasets.Phishing,
    "image-segments": datasets.ImageSegments,
    "bananas": datasets.Bananas,
}


def _label(y: Any) -> Any:
    return int(y) if isinstance(y, bool) else y


def write_dataset(name: str, fmt: str, out: TextIO, label: str = "y") -> int:
    """Write data set ``name`` to ``out`` in format ``fmt``; return the number of rows.

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> write_dataset("phishing", "csv", buf)
    1250
    >>> buf.getvalue().splitlines()[0]
    'empty_server_form_handler,popup_window,https,request_from_other_domain,anchor_from_other_domain,is_popular,long_url,age_of_domain,ip_in_url,y'

    """
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
