"""The label encodings a binary learner accepts: bool, {0, 1} or {-1, +1}."""

from __future__ import annotations

from typing import Any

from stream_perceptron.errors import LabelError, StateError
from stream_perceptron.lazy_numpy import is_bool
from stream_perceptron.state import short

__all__ = ["BinaryLabels", "predicted_label"]

_ENCODINGS: dict[str, tuple[Any, Any]] = {
    "bool": (False, True),
    "0/1": (0, 1),
    "-1/+1": (-1, 1),
}


def predicted_label(encoding: str, positive: bool) -> Any:
    """The label a binary prediction is written as: the positive or the negative class of
    ``encoding`` (``False``/``True``, ``0``/``1`` or ``-1``/``1``).

    The one decoder of both engine paths: the record path's learners decode with
    :meth:`BinaryLabels.decode` (and its ``negative``/``positive``, this function's values) and
    the block path with this function of each row's encoding name, never by comparing labels
    (``(0, 1) == (False, True)``: compared pairs would take one encoding for the other).

    >>> predicted_label("0/1", True), predicted_label("bool", True)
    (1, True)
    """
    return _ENCODINGS[encoding][1 if positive else 0]


class BinaryLabels:
    """Maps a caller's binary labels to -1/+1 and back, remembering the encoding given.

    Until a label is seen the encoding is ``bool``. A first label of ``1`` alone does not tell
    {0, 1} from {-1, +1}: predictions use {0, 1} until a ``0`` or ``-1`` settles it.

    Examples
    --------
    >>> labels = BinaryLabels()
    >>> labels.encode(-1), labels.encode(1), labels.encoding
    (-1, 1, '-1/+1')
    >>> labels.decode(-1)
    -1
    >>> labels.encode(0)
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.LabelError: label 0 is outside the binary encoding -1/+1 (labels -1, 1)

    """

    __slots__ = ("encoding", "settled", "_codes", "negative", "positive")

    def __init__(self, encoding: str = "bool", settled: bool = False) -> None:
        self._set(encoding, settled)

    def _set(self, encoding: str, settled: bool) -> None:
        self.encoding = encoding
        self.settled = settled
        self.negative = predicted_label(encoding, False)
        self.positive = predicted_label(encoding, True)
        self._codes: dict[Any, int] = (
            {self.negative: -1, self.positive: 1}
            if settled
            else ({1: 1} if encoding == "0/1" else {})
        )

    def encode(self, y: Any) -> int:
        """Return -1 or +1 for label ``y``; the first labels fix the encoding."""
        code = self._codes.get(y)
        if code is not None:
            return code
        code, setting = self.propose(y)
        if setting is not None:
            self._set(*setting)
        return code

    def propose(self, y: Any) -> tuple[int, tuple[str, bool] | None]:
        """``(code, setting)``: what :meth:`encode` would return and the ``(encoding,
        settled)`` it would then hold (``None``: unchanged), changing nothing (a learner
        commits it with :meth:`commit` once the example is learned). Raises
        :class:`LabelError` as :meth:`encode` does."""
        code = self._codes.get(y)
        if code is not None:
            return code, None
        if not self.settled:
            y_bool = is_bool(y)
            nothing_seen = not self._codes
            if nothing_seen and y_bool:
                return (1 if y else -1), ("bool", True)
            if not y_bool and _is_number(y):
                if y == -1:
                    return -1, ("-1/+1", True)
                if y == 0:
                    return -1, ("0/1", True)
                if y == 1 and nothing_seen:
                    return 1, ("0/1", False)
        labels = ", ".join(repr(v) for v in (self.negative, self.positive))
        raise LabelError(
            f"label {y!r} is outside the binary encoding {self.encoding} (labels {labels})"
        )

    def commit(self, setting: tuple[str, bool] | None) -> None:
        """Hold the encoding :meth:`propose` returned (``None``: nothing to do)."""
        if setting is not None:
            self._set(*setting)

    def encode_known(self, y: Any) -> int:
        """Like :meth:`encode`, but never changes the encoding (for read-only uses)."""
        code = self._codes.get(y)
        if code is not None:
            return code
        if not self.settled and (is_bool(y) or _is_number(y)):
            if y == 1:
                return 1
            if y in (0, -1):
                return -1
        raise LabelError(f"label {y!r} is outside the binary encoding {self.encoding}")

    def settled_code(self, y: Any) -> int | None:
        """-1 or +1 for ``y`` once the encoding is settled and ``y`` is one of its labels;
        ``None`` otherwise (then :meth:`encode` decides)."""
        return self._codes.get(y) if self.settled else None

    def decode(self, sign: int) -> Any:
        """The caller's label for sign -1 or +1: :func:`predicted_label`'s, cached."""
        return self.positive if sign > 0 else self.negative

    def get_state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"encoding": self.encoding, "settled": self.settled}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> BinaryLabels:
        """Rebuild from :meth:`get_state`; :class:`StateError` for anything it never gives."""
        if not isinstance(state, dict):
            raise StateError(f"labels is {short(state)}, not a label encoding")
        encoding, settled = state.get("encoding"), state.get("settled")
        if not isinstance(encoding, str) or encoding not in _ENCODINGS:
            raise StateError(f"labels.encoding is {short(encoding)}, not one of "
                             f"{', '.join(_ENCODINGS)}")  # fmt: skip
        # only bool (nothing seen) and 0/1 (a first label 1) are ever open
        if not isinstance(settled, bool) or (encoding == "-1/+1" and not settled):
            raise StateError(f"labels.settled is {short(settled)} for the encoding {encoding}")
        return cls(encoding, settled)


def _is_number(y: Any) -> bool:
    if is_bool(y):
        return False
    try:
        return float(y) == y
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past float's range
        return False
