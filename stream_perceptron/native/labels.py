"""A batch's labels as the binary dense kernel's signs, encoded as the row loop encodes them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_perceptron.errors import LabelError
from stream_perceptron.formats.base import parse_label

if TYPE_CHECKING:
    from stream_perceptron.learners.binary_blocks import BinaryBlocks

__all__ = ["encode_labels"]


def encode_labels(
    model: BinaryBlocks, labels: Sequence[Any]
) -> tuple[np.ndarray, list[tuple[Any, Any]], dict[int, LabelError]]:
    """Encode a batch's labels as :meth:`Perceptron.learn_dense` (and the binary
    ``PassiveAggressive``'s) wants them, as the row loop would.

    ``labels`` are parsed labels (``None``: unlabelled) or raw label cells (``bytes``, parsed
    with :func:`parse_label`, ``b""`` unlabelled). Encoding does not depend on the weights, so
    encoding the whole batch first leaves ``model._labels`` as the interleaved loop does.

    Returns ``(signs, classes, errors)``: ``signs`` int8 (``0`` for unlabelled rows and for
    rejected ones), ``classes[i]`` the ``(negative, positive)`` labels that decode row ``i``'s
    prediction (the encoding can settle during a batch), and ``errors`` row -> the
    :class:`LabelError` of a label outside the encoding: drop those rows from ``X`` and
    ``signs`` before ``learn_dense`` (the loop neither predicts nor learns them).
    """
    codec = model._labels
    signs = np.zeros(len(labels), dtype=np.int8)
    classes: list[tuple[Any, Any]] = []
    errors: dict[int, LabelError] = {}
    parsed: dict[bytes, Any] = {}
    encoding = codec.encoding
    current = (codec.negative, codec.positive)
    for i, y in enumerate(labels):
        if isinstance(y, bytes):
            cell = y
            if cell in parsed:
                y = parsed[cell]
            else:
                y = parsed[cell] = parse_label(cell.decode("utf-8"))
        if y is not None:
            try:
                signs[i] = codec.encode(y)
            except LabelError as e:
                errors[i] = e
            if codec.encoding != encoding:
                encoding = codec.encoding
                current = (codec.negative, codec.positive)
        classes.append(current)
    return signs, classes, errors
