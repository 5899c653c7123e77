"""libsvm / svmlight: ``label index:value index:value ...``."""

from __future__ import annotations

from stream_perceptron.errors import RecordError
from stream_perceptron.formats.base import (
    DUPLICATE_FEATURE,
    EMPTY_RECORD,
    MALFORMED_TOKEN,
    Example,
    decode_utf8,
    parse_label,
    to_number,
)

__all__ = ["LibsvmParser"]


class LibsvmParser:
    """Sparse ``label index:value`` lines; feature names are the indices as text.

    A ``qid:`` token is ignored, so is a trailing ``# comment``. A line whose first token is a
    feature (contains ``:``) is unlabelled.

    Examples
    --------
    >>> LibsvmParser().parse(b"-1 qid:3 1:0.5 10:-2 # note")
    Example(x={'1': 0.5, '10': -2.0}, y=-1)
    >>> LibsvmParser().parse(b"2:1.0")
    Example(x={'2': 1.0}, y=None)

    """

    header_pending = False

    def parse(self, value: bytes) -> Example:
        text = decode_utf8(value)
        hash_at = text.find("#")
        if hash_at >= 0:
            text = text[:hash_at]
        tokens = text.split()
        if not tokens:
            raise RecordError(EMPTY_RECORD, "empty line")
        y = None
        if ":" not in tokens[0]:
            y = parse_label(tokens[0])
            tokens = tokens[1:]
        x: dict[str, float] = {}
        for token in tokens:
            name, sep, v = token.partition(":")
            if not sep or not name or not v or ":" in v:
                raise RecordError(MALFORMED_TOKEN, f"token {token[:50]!r}")
            if name == "qid":
                continue
            if name in x:  # VW would add the two, River keep the last: neither is said
                raise RecordError(DUPLICATE_FEATURE, f"index {name!r} given twice")
            x[name] = to_number(name, v)
        return Example(x, y)
