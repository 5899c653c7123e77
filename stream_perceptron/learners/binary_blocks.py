"""What the binary learners' block path shares: a block's labels encoded as signs.

The engine's block path (``engine/blocks.py``) encodes a block's label cells with
:meth:`BinaryBlocks.encode_block` before the learner's ``learn_dense``, and puts the encoding
back with :attr:`BinaryBlocks.label_encoding` when ``learn_dense`` refuses the block. The
binary perceptron and the binary passive-aggressive learner both take it.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from stream_perceptron import native
from stream_perceptron.errors import LabelError
from stream_perceptron.formats.base import DenseBatch, parse_label
from stream_perceptron.learners.block_learning import BlockResult, learn_binary_block
from stream_perceptron.learners.labels import BinaryLabels

__all__ = ["BinaryBlocks", "encode_labels"]


class BinaryBlocks:
    """Label encoding for a block (a mix-in of a binary learner with a ``_labels``
    :class:`~stream_perceptron.learners.labels.BinaryLabels`)."""

    _labels: BinaryLabels

    def encode_block(
        self, keys: Sequence[Hashable], label_of: Mapping[Hashable, Any], *,
        atomic: bool = False, ids: Any = None,
    ) -> tuple[Any, list[str], dict[int, LabelError]] | None:  # fmt: skip
        """A block's labels as the signs :meth:`learn_dense` takes, encoded as the row loop
        would encode them; row ``i``'s label is ``label_of[keys[i]]`` (``None``: unlabelled),
        or with ``ids`` (int32, a row each) ``label_of[keys[ids[i]]]``: ``keys`` are then the
        block's distinct keys, each looked up once.

        Returns ``(signs, encodings, errors)``: ``signs`` int8 (an ``array("b")`` or an int8
        ``memoryview``, no NumPy on the block path; 0 for unlabelled rows and for
        rejected ones), ``encodings[i]`` the name of the encoding that decodes row ``i``'s
        prediction (:func:`~stream_perceptron.learners.labels.predicted_label`; the encoding
        can settle within a block), ``errors`` row -> the
        :class:`LabelError` of a label outside the encoding (leave those rows out of
        :meth:`learn_dense`). ``atomic``: when a label is outside the encoding, leave the
        encoding as it was and return ``None`` (the row loop would stop at that label).

        Examples
        --------
        >>> from stream_perceptron import Perceptron
        >>> model = Perceptron()
        >>> cells = {b"1": 1, b"0": 0, b"": None}
        >>> signs, encodings, errors = model.encode_block([b"1", b"0", b""], cells)
        >>> signs.tolist(), encodings[0], errors
        ([1, -1, 0], '0/1', {})

        """
        codec = self._labels
        if codec.settled:  # the usual case: one lookup per distinct key
            sign_of: dict[Hashable, int] = {}
            for key in set(keys) if ids is None else keys:
                y = label_of[key]
                code = codec.settled_code(y) if y is not None else 0  # 0: unlabelled
                if code is None:
                    break  # a label outside the encoding: the general way
                sign_of[key] = code
            else:
                if ids is not None:  # each distinct key's sign, then one a row (in C)
                    signs = _take(list(map(sign_of.__getitem__, keys)), ids)
                else:
                    signs = array("b", map(sign_of.__getitem__, keys))
                return signs, [codec.encoding] * len(signs), {}
        if ids is not None:
            keys = list(map(keys.__getitem__, ids.tolist()))
        saved = codec.get_state() if atomic else None
        signs, encodings, errors = encode_labels(self, [label_of[key] for key in keys])
        if errors and saved is not None:
            self._labels = BinaryLabels.from_state(saved)
            return None
        return signs, encodings, errors

    def learn_block(
        self, dense: DenseBatch, label_of: Mapping[bytes, Any], /, *, atomic: bool = False
    ) -> BlockResult | None:
        """See :meth:`StreamClassifier.learn_block
        <stream_perceptron.learners.StreamClassifier.learn_block>`."""
        return learn_binary_block(self, dense, label_of, atomic)  # type: ignore[arg-type]

    @property
    def label_encoding(self) -> dict[str, Any]:
        """The binary label encoding as :meth:`get_state` saves it; set it back to undo
        :meth:`encode_block` (the engine's block path, when :meth:`learn_dense` refuses a
        block)."""
        return self._labels.get_state()

    @label_encoding.setter
    def label_encoding(self, state: dict[str, Any]) -> None:
        self._labels = BinaryLabels.from_state(state)


def _take(signs: list[int], ids: Any) -> Any:
    """``signs[ids[i]]`` for every row, int8 (``ids`` int32): in C when it is built."""
    if native.dense is None:
        return array("b", map(signs.__getitem__, ids.tolist()))
    return memoryview(native.dense.take(array("b", signs), ids)).cast("b")


def encode_labels(
    model: BinaryBlocks, labels: Sequence[Any]
) -> tuple[Any, list[str], dict[int, LabelError]]:
    """Encode a batch's labels as :meth:`Perceptron.learn_dense` (and the binary
    ``PassiveAggressive``'s) wants them, as the row loop would.

    ``labels`` are parsed labels (``None``: unlabelled) or raw label cells (``bytes``, parsed
    with :func:`parse_label`, ``b""`` unlabelled). Encoding does not depend on the weights, so
    encoding the whole batch first leaves ``model._labels`` as the interleaved loop does.

    Returns ``(signs, encodings, errors)``: ``signs`` int8 (``0`` for unlabelled rows and for
    rejected ones), ``encodings[i]`` the name of the encoding that decodes row ``i``'s
    prediction (:func:`~stream_perceptron.learners.labels.predicted_label`; the encoding can
    settle during a batch), and ``errors`` row -> the
    :class:`LabelError` of a label outside the encoding: drop those rows from ``X`` and
    ``signs`` before ``learn_dense`` (the loop neither predicts nor learns them).
    """
    codec = model._labels
    signs = array("b", bytes(len(labels)))
    encodings: list[str] = []
    errors: dict[int, LabelError] = {}
    parsed: dict[bytes, Any] = {}
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
        encodings.append(codec.encoding)
    return signs, encodings, errors
