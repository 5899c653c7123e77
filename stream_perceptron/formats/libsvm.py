"""libsvm / svmlight: ``label index:value index:value ...``."""

from __future__ import annotations

from stream_perceptron.errors import RecordError
from stream_perceptron.formats.base import (
    DUPLICATE_FEATURE,
    EMPTY_RECORD,
    MALFORMED_TOKEN,
    DenseBatch,
    Example,
    LabelCache,
    decode_utf8,
    parse_label,
    to_number,
)
from stream_perceptron.formats.label_cells import distinct_cells

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

    def __init__(self) -> None:
        self._labels = LabelCache()  # label token -> label, as parse_label reads it
        #: Whether :meth:`parse_dense_block` gives blocks (the engine sets it when its learner
        #: takes sparse rows); libsvm has no dense form.
        self.sparse_blocks = False

    @property
    def label_cache(self) -> LabelCache:
        """Label token -> parsed label, for the block path (see :class:`DenseParser`)."""
        return self._labels

    def parse_dense(self, values: list[bytes]) -> DenseBatch | None:
        """:meth:`parse_dense_block` of a list of lines."""
        block = b"\n".join(values) + b"\n"
        if block.count(b"\n") != len(values):
            return None
        return self.parse_dense_block(block, len(values))

    def parse_dense_block(self, block: bytes, n: int | None) -> DenseBatch | None:
        """``n`` lines (each ending with a newline) as sparse rows, the features and labels
        :meth:`parse` gives each (see
        :func:`~stream_perceptron.formats.scan.parse_sparse_libsvm_block`), when
        :attr:`sparse_blocks` is set and every line is of a form the scanner reads; else
        ``None``: parse the lines one by one.

        Examples
        --------
        >>> p = LibsvmParser()
        >>> p.sparse_blocks = True
        >>> names, rows, cells = p.parse_dense_block(b"1 3:0.5 a:2\\n-1 qid:2 a:1e1 # c\\n", 2)
        >>> names, rows.dicts(names), [p.label_cache[c] for c in cells]
        (['3', 'a'], [{'3': 0.5, 'a': 2.0}, {'a': 10.0}], [1, -1])

        """
        from stream_perceptron import native
        from stream_perceptron.formats import scan

        if not self.sparse_blocks:
            return None
        c = native.dense
        if n is None:  # memchr (bytes.count goes a byte at a time: 5 % of row 15d's time)
            n = block.count(b"\n") if c is None else c.count_lines(block, 0, len(block))
        sparse = scan.parse_sparse_libsvm_block(block, n)
        if sparse is None:
            return None
        try:
            for cell in distinct_cells(sparse[2]):
                self._labels[cell]  # noqa: B018 - parses it, or raises for a bad one
        except (ValueError, RecordError):  # UnicodeDecodeError is a ValueError
            return None
        return sparse

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
