"""``pull-model``: the cluster's current model, read from the model topic into a view."""

from __future__ import annotations

from typing import Any

from connectors import PositionKey
from stream_perceptron.errors import EngineError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.sharing.signing import RecordSigner
from stream_perceptron.sharing.states import learner_of
from stream_perceptron.sharing.view import ModelView

__all__ = ["incomplete", "pull_model", "read_view"]


def read_view(log: Any, signer: RecordSigner | None = None) -> ModelView:
    """What the model topic ``log`` holds, read into a view (with ``signer``: only the records
    signed with the group's key count)."""
    view = ModelView(signer=signer)
    view.ingest(log.read_new())
    return view


def pull_model(
    log: Any, signer: RecordSigner | None = None
) -> tuple[StreamClassifier, int, dict[PositionKey, int], ModelView]:
    """The cluster's current model from the model topic: ``(model, version, next offsets per
    partition, the view: what was refused, by reason)``; with ``signer``, only the records
    signed with the group's key count.

    Raises
    ------
    EngineError
        If the topic holds no model yet.
    """
    view = read_view(log, signer)
    current = view.current()
    if current is None:
        raise EngineError("the model topic holds no model yet")
    state, version = current
    offsets = {k: p.next_offset for k, p in view.partitions.items()}
    return learner_of(state), version, offsets, view


def incomplete(model: StreamClassifier, view: ModelView) -> str | None:
    """Why the pulled ``model`` is not the whole cluster's (``None``: it is): the partition
    records count examples learned that it does not hold, or fewer than it holds."""
    counted = view.counts()[0]
    if model.n_seen == counted:
        return None
    return f"the model holds {model.n_seen} examples, the partition records count {counted}"
