"""Record formats: bytes of one record -> an example ``(x, y)``, or a RecordError with a reason.

Every parser has ``parse(value: bytes) -> Example | None`` (``None``: the record carries no
example, e.g. a CSV header) and a ``header_pending`` flag (True while a header is awaited).
"""

from __future__ import annotations

from stream_perceptron.formats.base import Example, Parser
from stream_perceptron.formats.delimited import CsvParser
from stream_perceptron.formats.jsonl import JsonLinesParser
from stream_perceptron.formats.libsvm import LibsvmParser

__all__ = ["Example", "Parser", "FORMATS", "make_parser"]

FORMATS = ("jsonl", "csv", "libsvm")


def make_parser(fmt: str, label: str = "y", key: str | None = None) -> Parser:
    """The parser for format ``fmt`` (``jsonl``, ``csv`` or ``libsvm``); ``key``: the join
    key's field (``--join-key``: csv and jsonl, whose fields have names).

    Examples
    --------
    >>> make_parser("libsvm").parse(b"+1 3:0.5 7:2")
    Example(x={'3': 0.5, '7': 2.0}, y=1)

    """
    if fmt == "jsonl":
        return JsonLinesParser(label, key)
    if fmt == "csv":
        return CsvParser(label, key)
    if key is not None:
        raise ValueError(f"a join key needs named fields (csv or jsonl), not {fmt}")
    if fmt == "libsvm":
        return LibsvmParser()
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
