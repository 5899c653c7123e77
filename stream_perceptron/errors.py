"""The project's exceptions: every error raised on purpose derives from one class."""

from __future__ import annotations

__all__ = [
    "StreamPerceptronError",
    "EngineError",
    "BadRecordError",
    "LabelError",
    "StateError",
    "RecordError",
    "ValueTooLargeError",
    "UsageError",
]


class StreamPerceptronError(Exception):
    """Base class of every error raised by stream-perceptron."""


class LabelError(StreamPerceptronError, ValueError):
    """A label does not fit the label encoding the learner has seen so far."""


class StateError(StreamPerceptronError, ValueError):
    """A saved model state (checkpoint) is missing, unreadable or of another version."""


class RecordError(StreamPerceptronError, ValueError):
    """An input record cannot be turned into an example.

    Parameters
    ----------
    reason
        A short machine-readable reason, used as a metric label and in dead letters.
    detail
        A human-readable explanation.

    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ValueTooLargeError(RecordError):
    """An example whose update would make the model non-finite (a weight, a bias, R or an
    averaging accumulator overflowing to inf or NaN, or an int too large for a float): the
    learner refused it and is exactly as it was before it. Reason ``value_too_large``."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("value_too_large", detail)


class UsageError(StreamPerceptronError):
    """Command-line flags that cannot work with what a file holds, found once it is read (a
    resumed checkpoint's model): exit 2, as argparse's usage errors."""

    exit_code = 2


class EngineError(StreamPerceptronError):
    """The run cannot go on (unusable header, unreadable source, failed checkpoint)."""


class BadRecordError(EngineError):
    """A bad record under ``on_error="fail"``."""
