"""The one outcome path: what follows from a record once it is predicted, learned or refused.

Both the per-record path and the block path hand their results here, so counting, the window
of recent examples, prediction output and dead letters are each written once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from connectors import PositionKey, Record
from stream_perceptron.engine.outputs import Outputs, PredictionBlock, prediction_line
from stream_perceptron.engine.window import RecentWindow
from stream_perceptron.errors import BadRecordError, EngineError, LabelError, RecordError
from stream_perceptron.formats.base import LABEL_OUTSIDE_ENCODING
from stream_perceptron.stats import RunStats

if TYPE_CHECKING:
    from stream_perceptron.learners import StreamClassifier

__all__ = ["BadRecordError", "EngineError", "Outcomes", "refusal"]

logger = logging.getLogger(__name__)


class Outcomes:
    """Turns each record's outcome into every side effect: counts, the window of recent
    examples, the prediction line, the dead letter.

    Parameters
    ----------
    stats
        The run's counters.
    outputs
        Prediction and dead-letter sinks.
    window
        The recent labelled examples (``None``: not kept).
    on_error
        ``"skip"``: a bad record is counted and kept, and the run goes on; ``"fail"``: it stops
        the run with :class:`BadRecordError`.
    count_partition
        Also told, per source partition, how many examples were learned and how many were
        mistakes (shared-model mode's coordinator counts them per partition); ``None``: not.

    Examples
    --------
    >>> from connectors import MemorySink, Position
    >>> sink = MemorySink()
    >>> outcomes = Outcomes(RunStats(), Outputs(predictions=sink), None, "skip")
    >>> outcomes.learned(Record(b"1,1", Position("stdin", 1)), {"a": 1.0}, 1, 0)
    >>> outcomes.stats.mistakes, sink.lines[0][-45:]
    (1, b'"prediction": 0, "label": 1, "mistake": true}')

    """

    def __init__(
        self, stats: RunStats, outputs: Outputs, window: RecentWindow | None, on_error: str,
        count_partition: Callable[[PositionKey, int, int], None] | None = None,
    ) -> None:  # fmt: skip
        if on_error not in ("skip", "fail"):
            raise ValueError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
        self.stats = stats
        self._count_partition = count_partition
        self.window = window
        self.on_error = on_error
        self._write_prediction = outputs.prediction_writer()
        self._write_predictions = outputs.prediction_block_writer()
        self._write_dead_letter = outputs.dead_letter_writer()

    @property
    def writes_predictions(self) -> bool:
        """Whether predictions are written (the block path then needs its rows as records)."""
        return self._write_prediction is not None

    @property
    def writes_dead_letters(self) -> bool:
        """Whether dead letters are kept (the join then makes its dropped records' bytes)."""
        return self._write_dead_letter is not None

    def predicted(self, record: Record, prediction: Any, waiting: bool = False) -> None:
        """An unlabelled record was predicted (``waiting``: an event whose outcome the join
        waits for, counted by it)."""
        if waiting:
            self.stats.count_waiting()
        else:
            self.stats.count_unlabelled()
        if self._write_prediction is not None:
            self._write_prediction(record, prediction_line(record, prediction))

    def learned(
        self, record: Record, x: Any, y: Any, prediction: Any, line: bool = True
    ) -> None:
        """A labelled record was predicted (``prediction``, made before learning) and learned
        (``line=False``: an outcome whose event's prediction was written when it came)."""
        mistake = prediction != y
        stats = self.stats
        reference = stats.drift_reference
        stats.count_learned(mistake, watched=reference is None)
        if reference is not None:
            reference.observe(x, y, stats.learned)
        if self._count_partition is not None:
            position = record.position
            self._count_partition((position.source, position.partition), 1, mistake)
        if self.window is not None:
            self.window.add(x, y)
        if line and self._write_prediction is not None:
            self._write_prediction(record, prediction_line(record, prediction, y, mistake))

    def learned_block(
        self,
        key: PositionKey,
        mistakes: list[bool],
        unlabelled: int,
        window_rows: Callable[[], tuple[list[str], Any, Sequence[bytes]]],
        predictions: Callable[[], PredictionBlock],
    ) -> None:
        """A block of ``key`` (source, partition) was predicted and learned: ``mistakes`` of
        its labelled rows in order,
        ``unlabelled`` rows only predicted; ``window_rows`` gives its labelled rows for the
        window (names, values, raw label cells) and ``predictions`` its rows for the outputs,
        both called only when needed."""
        stats = self.stats
        stats.count_many(mistakes, unlabelled=unlabelled, watched=stats.drift_reference is None)
        if self._count_partition is not None and mistakes:
            self._count_partition(key, len(mistakes), sum(mistakes))
        if self.window is not None:
            self.window.defer(*window_rows())
        if self._write_predictions is not None:
            self._write_predictions(predictions())

    def refused(
        self, record: Record, learner: StreamClassifier, y: Any, error: LabelError | RecordError
    ) -> None:
        """The learner refused ``record``'s example (label ``y``) with ``error``: a bad
        record, for the reason :func:`refusal` decides."""
        self.bad(record, *refusal(learner, y, error))

    def dead_letter(self, record: Record, reason: str, detail: str) -> None:
        """Keep ``record`` as a dead letter (when there is a sink), counting nothing: the join's
        events that met no outcome, outcomes that met no event."""
        if self._write_dead_letter is not None:
            self._write_dead_letter(record, reason, detail)

    def bad(self, record: Record, reason: str, detail: str) -> None:
        """A record was refused: counted by reason and kept as a dead letter, the model left
        untouched; under ``on_error="fail"`` the run stops."""
        self.stats.count_invalid(reason)
        if self._write_dead_letter is not None:
            self._write_dead_letter(record, reason, detail)
        if self.on_error == "fail":
            raise BadRecordError(f"bad record at {record.position}: {reason}: {detail}")
        logger.debug("bad record at %s: %s: %s", record.position, reason, detail)


def refusal(learner: StreamClassifier, y: Any, error: LabelError | RecordError) -> tuple[str, str]:
    """``(reason, detail)`` of a labelled example ``learner`` refused with ``error``: the one
    place both paths (the record path's ``predict_learn_one``, the block path's label
    encoding) decide why a record is refused.

    A record with several faults is refused for the first of, in this order:

    1. what its bytes are (``line_too_long``, then the parser's reasons: ``invalid_json``,
       ``non_numeric_value``, ``non_finite_value``, a number past float64 as
       ``value_too_large``, ...): found before there is an example;
    2. ``label_outside_encoding``: the label is outside the model's label encoding as it
       stands (a third label for a binary model, ``true`` beside a class ``1``);
    3. ``value_too_large``: learning the example would make the model non-finite (R, a
       weight, a bias, an averaging accumulator, the scaler's statistics, the Fourier map).

    The label comes before the values because it needs no arithmetic: the block path encodes a
    block's labels before it learns any row, and a row refused for its label is never offered
    to the model. A learner may find its values too large first (``Preprocessed`` transforms
    before its model sees the label), so a value refusal asks the learner's ``check_label``.
    """
    if isinstance(error, LabelError):
        return LABEL_OUTSIDE_ENCODING, str(error)
    try:
        learner.check_label(y)  # the learner is as it was: a refused example leaves no trace
    except LabelError as e:
        return LABEL_OUTSIDE_ENCODING, str(e)
    return error.reason, error.detail
