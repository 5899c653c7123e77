"""``--join-key`` on the block path: a run of keyed JSON lines joined and learned in one kernel
call, exact to the record-by-record step (:mod:`~stream_perceptron.engine.delayed`).

A run is scanned as sparse rows (the C scanner takes each line's join key string out as it
reads the line: :func:`~stream_perceptron.formats.scan.parse_keyed_jsonl_block`), the pending
store is brought to where the record path leaves it and the model's rows are made, in one C
loop (:func:`~stream_perceptron.join.blocks.plan_block`), and the rows go to the
learner's ``learn_block`` at once, in the records' order: an event's row predicted (its
features kept pending, its prediction stored once made), an outcome that meets its event as a
labelled row carrying the event's features, a record with both as an ordinary labelled row.
The kernel's outputs are then mapped back: one prediction line per event (none for an
outcome), the served accuracy against the prediction stored with the event, the learner's
own mistakes from the kernel.

The kernels need nothing new: ``learn_block`` already predicts unlabelled rows without
learning them. When the learner refuses the block (a label outside its encoding, a value too
large), nothing of the model has changed and the same rows go one by one, as the record path
would take them, each refusal a bad record; the pending store is the same either way.

Runs go the record path's way when the block path cannot be exact cheaply: JSON with a
backslash, a nested object, a field whose name starts with the key's and ``=``, a key that is a
number, a label without a key or features (a bad record); ``--on-error fail``; the reference
drift detector; learners without sparse rows; CSV.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from connectors import PositionKey
from stream_perceptron import native
from stream_perceptron.engine.blocks import LineRun, MessageRun, RecordRun, Run
from stream_perceptron.engine.delayed import DelayedLabels
from stream_perceptron.engine.outputs import BlockOrigin, PredictionBlock
from stream_perceptron.errors import LabelError, RecordError
from stream_perceptron.formats import scan
from stream_perceptron.formats.jsonl import JsonLinesParser
from stream_perceptron.formats.label_cells import LabelCells
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.join.blocks import OWN, BlockPlan, plan_block
from stream_perceptron.join.pending import Later
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners import StreamClassifier

__all__ = ["JoinBlockPath"]

_REFUSED = object()

#: Runs of fewer records go the record path's way (two topics merged by timestamp come as
#: runs of one topic at a time, often of a record or two).
MIN_RUN = 4


class JoinBlockPath:
    """The block path with ``--join-key`` (see the module's text); :meth:`learn` as
    :class:`~stream_perceptron.engine.blocks.BlockPath`'s."""

    takes_blocks = True

    def __init__(
        self, learner: StreamClassifier, parser: JsonLinesParser, delayed: DelayedLabels,
        resume_from: dict[PositionKey, int],
    ) -> None:  # fmt: skip
        self.learner = learner
        self.parser = parser
        self.delayed = delayed
        self.outcomes = delayed.outcomes
        self.resume_from = resume_from
        key = parser.key
        assert key is not None
        self._prefix = key + "="
        self._marker = b'"' + self._prefix.encode()
        self._cells: dict[tuple[type, Any], bytes] = {}  # a label -> a cell the cache maps to it

    @classmethod
    def of(
        cls, learner: StreamClassifier, parser: Any, delayed: DelayedLabels,
        resume_from: dict[PositionKey, int],
    ) -> JoinBlockPath | None:  # fmt: skip
        """The join's block path for this learner and parser, or ``None`` when it has none."""
        if native.dense is None or not isinstance(parser, JsonLinesParser):
            return None
        key = parser.key
        if key is None or key == parser.label or any(c in key for c in '="\\'):
            return None
        if not (learner.dense_capable and learner.sparse_capable):
            return None
        if delayed.outcomes.on_error != "skip":
            return None
        return cls(learner, parser, delayed, resume_from)

    # -- one run -------------------------------------------------------------------------------
    def learn(self, run: Run) -> bool:
        """Join and learn ``run`` whole and return True, or return False having changed nothing
        (lines still to be skipped on resume, lines not plain or not of the forms above)."""
        stats = self.outcomes.stats
        if stats.drift_reference is not None or run.start < self.resume_from.get(run.key, 0):
            return False
        c = native.dense
        if c is not None and isinstance(run, LineRun) and run.block.known_count is None:
            text = run.block.data  # counted at memchr's speed (bytes.count: 4x slower)
            run.block.found_count(c.count_lines(text, 0, len(text)))
        if run.count < MIN_RUN:  # a few records: a block's fixed cost is more than theirs
            return False
        data = _block_bytes(run)
        if data is None:
            return False
        n = run.count
        # an escape; a field named as the key's string features are; each looked for by one
        # byte first (a search for a longer string in a block of JSON takes 5-10 times as
        # long); the nested form the scanner refuses
        if b"\\" in data or (b"=" in data and self._marker in data):
            return False
        key = self.parser.key
        assert key is not None
        scanned = scan.parse_keyed_jsonl_block(data, n, self.parser.label, key)
        if scanned is None:
            return False
        kept, stripped, cells, keys = scanned
        if key in kept:  # a number or a boolean as the key: the record path refuses it
            return False
        try:
            labels = list(map(self.parser.label_cache.__getitem__, cells))
        except (ValueError, RecordError):  # UnicodeDecodeError and JSONDecodeError are ones
            return False
        starts = np.frombuffer(stripped.indptr, np.int64)
        lengths = np.diff(starts)
        has_x = (lengths > 0).tolist()
        if None in keys and any(
            k is None and y is not None and not x for k, y, x in zip(keys, labels, has_x)
        ):
            return False  # a label without features or key: a bad record, the record path's
        shape, features = _features(stripped, kept, starts, lengths)
        where = run.origin()
        lines: list[bytes] | None = None

        def raw(i: int) -> bytes:
            nonlocal lines
            if lines is None:
                lines = _values(run, data)
            return lines[i]

        delayed = self.delayed
        origin = (where.source, where.partition)
        plan = plan_block(delayed.pending, delayed.counts, stats.records, keys, labels,
                          stripped.indptr, stripped.values, shape, features, raw, origin,
                          where.offsets, (stripped.slots, kept))  # fmt: skip
        if not plan.rows:  # outcomes kept waiting only: nothing for the model
            self._one_by_one(run, plan, keys, stripped, kept, labels)
            return True
        X, names_k = plan.kernel if plan.kernel is not None else _kernel_rows(plan, stripped, kept)
        cells_k: Any = list(map(cells.__getitem__, plan.rows))
        for k, label in plan.labels.items():
            cells_k[k] = self._cell(label)
        cells_k = _few(cells_k)
        result = self.learner.learn_block(
            (names_k, X, cells_k), self.parser.label_cache, atomic=True
        )
        if result is None:
            self._one_by_one(run, plan, keys, stripped, kept, labels)
            return True
        shown = result.rows()
        if shown.codes is not None:
            made = [case[0] for case in shown.cases]
            predictions = list(map(made.__getitem__, shown.codes))
        else:
            predictions = list(shown.shown)
        _by_record(plan, predictions, n)
        row_labels = self._row_labels(plan, labels)
        self._served(plan, predictions, row_labels)
        unlabelled = len(plan.rows) - len(result.mistakes) - plan.waiting_rows
        waiting = plan.waiting + plan.waiting_rows
        assert stats.join is not None
        stats.join.records += waiting
        stats.records_this_run += waiting

        def prediction_block() -> PredictionBlock:
            return _predictions(where, plan, predictions, row_labels)

        self.outcomes.learned_block(
            run.key, result.mistakes, unlabelled, result.window_rows, prediction_block
        )
        for _, gone in plan.drops:
            delayed._dropped(delayed.counts, delayed.pending, gone)
        return True

    def _cell(self, label: Any) -> bytes:
        """A label cell the parser's label cache maps to ``label`` (no line's cell: not UTF-8),
        for a row whose label came with an outcome of an earlier block."""
        index = (type(label), label)
        cell = self._cells.get(index)
        if cell is None:
            cell = self._cells[index] = b"\xff" + str(len(self._cells)).encode()
            dict.__setitem__(self.parser.label_cache, cell, label)
        return cell

    @staticmethod
    def _row_labels(plan: BlockPlan, labels: list[Any]) -> list[Any]:
        """Each kernel row's label."""
        row_labels = list(map(labels.__getitem__, plan.rows))
        for k, label in plan.labels.items():
            row_labels[k] = label
        return row_labels

    def _served(self, plan: BlockPlan, predictions: list[Any], row_labels: list[Any]) -> None:
        """Count each joined pair against its served prediction (a refused row: not joined)."""
        counts = self.delayed.counts
        if native.dense is not None and type(predictions) is list and type(row_labels) is list:
            mistakes, delays = native.dense.join_served(
                plan.served, predictions, row_labels, _REFUSED, OWN, Later
            )
            counts.joined += len(delays)
            counts.served_mistakes += mistakes
            counts.observe_delays(delays)
            return
        delays = []
        mistakes = 0
        for k, event, delay in plan.served:
            made = predictions[k]
            if made is _REFUSED:
                continue
            if event is not OWN:
                made = event.prediction
                if type(made) is Later:
                    made = made.block[event.arrival - made.clock]
            mistakes += made != row_labels[k]
            delays.append(delay)
        counts.joined += len(delays)
        counts.served_mistakes += mistakes
        counts.observe_delays(delays)

    def _one_by_one(
        self, run: Run, plan: BlockPlan, keys: list[Any], rows: SparseRows, names: list[str],
        labels: list[Any],
    ) -> None:  # fmt: skip
        """The planned rows one by one, as the record path takes them (the learner refused the
        block whole): each refusal a bad record, the rest learned or predicted in order."""
        records = run.records()
        learner, outcomes, delayed = self.learner, self.outcomes, self.delayed
        xs = rows.dicts(names)
        row_labels = self._row_labels(plan, labels)
        drops = iter(plan.drops)
        drop = next(drops, None)
        predictions: list[Any] = []
        for k, (i, y) in enumerate(zip(plan.rows, row_labels)):
            while drop is not None and drop[0] == k:
                delayed._dropped(delayed.counts, delayed.pending, drop[1])
                drop = next(drops, None)
            event = plan.pending.get(k)
            record = records[i]
            x: dict[Any, float] = xs[i] if event is None else event.features()
            if y is None:
                predictions.append(learner.predict_one(x))
                outcomes.predicted(record, predictions[-1], waiting=keys[i] is not None)
                continue
            try:
                predictions.append(learner.predict_learn_one(x, y))
            except (LabelError, RecordError) as e:  # the model refused the example
                outcomes.refused(record, learner, y, e)
                predictions.append(_REFUSED)
                continue
            outcomes.learned(record, x, y, predictions[-1], line=event is None)
        while drop is not None:
            delayed._dropped(delayed.counts, delayed.pending, drop[1])
            drop = next(drops, None)
        for _ in range(plan.waiting):
            outcomes.stats.count_waiting()
        _by_record(plan, predictions, len(records))
        self._served(plan, predictions, row_labels)


def _features(
    rows: SparseRows, names: list[str], starts: Any, lengths: Any
) -> tuple[tuple[str, ...] | None, Callable[[int], tuple[tuple[str, ...], bytes]]]:
    """The names of every row that has features (``None``: not one shape) and
    ``features(i)``: row ``i``'s feature names (a tuple shared by the rows of one shape) and
    its values packed (float64 bytes)."""
    indptr = starts.tolist()
    value_bytes = memoryview(rows.values).cast("B")
    slots = np.frombuffer(rows.slots, np.int32)
    some = np.flatnonzero(lengths)
    if len(some) and lengths[some].min() == lengths[some].max():  # maybe one shape
        width = int(lengths[some[0]])
        grid = slots[starts[some][:, None] + np.arange(width)]
        if (grid == grid[0]).all():
            shape = tuple(map(names.__getitem__, grid[0].tolist()))

            def one_shape(i: int) -> tuple[tuple[str, ...], bytes]:
                lo, hi = indptr[i], indptr[i + 1]
                return (shape if hi > lo else ()), value_bytes[8 * lo : 8 * hi].tobytes()

            return shape, one_shape
    slot_bytes = memoryview(rows.slots).cast("B")
    shapes: dict[bytes, tuple[str, ...]] = {}

    def any_shape(i: int) -> tuple[tuple[str, ...], bytes]:
        lo, hi = indptr[i], indptr[i + 1]
        key = slot_bytes[4 * lo : 4 * hi].tobytes()
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = tuple(names[s] for s in array("i", key))
        return shape, value_bytes[8 * lo : 8 * hi].tobytes()

    return None, any_shape


def _few(cells: list[bytes]) -> Any:
    """The cells as :class:`~stream_perceptron.formats.label_cells.LabelCells` when they are
    few distinct ones (the label encoding then encodes each once), else as they are."""
    ids = native.dense.empty(4 * len(cells)) if native.dense is not None else None
    joined = b"\n".join(cells)
    if ids is None or joined.count(b"\n") != len(cells) - 1:
        return cells
    distinct = native.dense.intern_lines(joined, ids, 64)  # type: ignore[union-attr]
    return cells if distinct is None else LabelCells(distinct, memoryview(ids).cast("i"))


def _block_bytes(run: Run) -> bytes | None:
    """The run's lines as one block, each ending with a newline (``None``: a line holds one,
    or a record is too long)."""
    if isinstance(run, LineRun):
        return run.block.data
    if isinstance(run, MessageRun):
        values = run.block.values
    else:
        assert isinstance(run, RecordRun)
        if any(record.error is not None for record in run.batch):
            return None
        values = [record.value for record in run.batch]
    data = b"\n".join(values) + b"\n"
    return data if data.count(b"\n") == len(values) else None


def _values(run: Run, data: bytes) -> list[bytes]:
    """Each record's bytes."""
    if isinstance(run, MessageRun):
        return list(run.block.values)
    if isinstance(run, RecordRun):
        return [record.value for record in run.batch]
    return data[:-1].split(b"\n")


def _kernel_rows(plan: BlockPlan, rows: SparseRows, names: list[str]) -> tuple[SparseRows,
                                                                            list[str]]:  # fmt: skip
    """The plan's rows for the kernel: a block row's features, or its pending event's (their
    names added to ``names`` where the block has not them)."""
    indptr = np.frombuffer(rows.indptr, np.int64)
    n = len(indptr) - 1
    order = np.asarray(plan.rows, np.int64)
    slots = np.frombuffer(rows.slots, np.int32)
    values = np.frombuffer(rows.values, np.float64)
    if plan.pending:
        index: dict[str, int] = {name: j for j, name in enumerate(names)}
        names = list(names)
        waited = list(plan.pending.values())
        shapes = list(map(attrgetter("names"), waited))
        packed: dict[int, bytes] = {}  # id of a shape (the tuple its events share) -> slots
        for shape in dict(zip(map(id, shapes), shapes)).values():
            for name in shape:
                if name not in index:
                    index[name] = len(names)
                    names.append(name)
            packed[id(shape)] = array("i", map(index.__getitem__, shape)).tobytes()
        more_slots = b"".join(map(packed.__getitem__, map(id, shapes)))
        more_values = b"".join(map(attrgetter("values"), waited))
        lengths = np.fromiter(map(len, shapes), np.int64, len(shapes))
        slots = np.concatenate((slots, np.frombuffer(more_slots, np.int32)))
        values = np.concatenate((values, np.frombuffer(more_values, np.float64)))
        indptr = np.concatenate((indptr, indptr[-1] + np.cumsum(lengths)))
        order[list(plan.pending)] = np.arange(n, n + len(plan.pending))
    starts = indptr[order]
    sizes = indptr[order + 1] - starts
    new_indptr = np.zeros(len(order) + 1, np.int64)
    np.cumsum(sizes, out=new_indptr[1:])
    take = np.arange(new_indptr[-1], dtype=np.int64) + np.repeat(starts - new_indptr[:-1], sizes)
    return SparseRows(_int64(new_indptr), memoryview(slots[take]), memoryview(values[take])), names


def _int64(a: Any) -> memoryview:
    """An int64 NumPy array as the ``q`` buffer the scanners give (NumPy's says ``l``)."""
    view: memoryview = memoryview(np.ascontiguousarray(a, np.int64))  # type: ignore[arg-type]
    return view.cast("B").cast("q")


def _by_record(plan: BlockPlan, predictions: list[Any], n: int) -> None:
    """Give the block's kept events their predictions: each record's row's, by record."""
    by_record = np.empty(n, dtype=object)
    if predictions:
        made = np.empty(len(predictions), dtype=object)
        made[:] = predictions  # each object as it is (a list would be read as a sequence)
        by_record[np.asarray(plan.rows, np.intp)] = made
    plan.predictions.block = by_record.tolist()  # a list: read by C (join_served) at once


def _predictions(
    where: BlockOrigin, plan: BlockPlan, predictions: list[Any], labels: list[Any]
) -> PredictionBlock:
    """The prediction lines of a planned block: one per row but an outcome's."""
    chosen = [k for k in range(len(plan.rows)) if k not in plan.pending]
    rows = list(map(plan.rows.__getitem__, chosen))
    shown = list(map(predictions.__getitem__, chosen))
    labels = list(map(labels.__getitem__, chosen))
    wrong = [y is not None and p != y for p, y in zip(shown, labels)]
    offsets, keys = where.offsets, where.keys
    origin = BlockOrigin(
        where.source, where.partition, list(map(offsets.__getitem__, rows)),
        None if keys is None else list(map(keys.__getitem__, rows)),
    )  # fmt: skip
    return PredictionBlock.of_rows(origin, shown, labels, wrong)
