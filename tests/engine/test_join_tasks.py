"""Shared-model mode's join: one store per partition task, its own clock, kept as a changelog.

What a task joins and expires must depend on the task's records only (partition p of the
events and of the labels topic, in their merged order): not on the other partitions a worker
reads beside it, nor on a handover to another worker in the middle (restored from the task's
changelog, compacted or not). The reference for each task is the engine's ordinary join (one
store, the run's record clock) run on that task's records alone.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest

from connectors import MemorySink, Position, Record
from stream_perceptron import Perceptron
from stream_perceptron.engine import Engine
from stream_perceptron.engine.outputs import Outputs
from stream_perceptron.formats import make_parser
from stream_perceptron.join import JoinCounts, PendingJoin
from stream_perceptron.join.tasks import TASK_KEY, JoinTasks

EVENTS, LABELS = "events", "labels"
PARTITIONS = 3
MAX_PENDING, LABEL_WAIT = 12, 25
JOIN_FIELDS = ("records", "events", "outcomes", "joined", "expired", "unmatched_outcome",
               "duplicate_outcome", "duplicate_event", "delay_buckets", "delay_sum")  # fmt: skip


class Batches:
    """A source of fixed batches (the engine's view of a Kafka merge's output)."""

    def __init__(self, batches: list[list[Record]]) -> None:
        self._batches = batches

    def batches(self) -> Iterator[list[Record]]:
        yield from self._batches

    def close(self) -> None:
        pass

    def __enter__(self) -> Batches:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def task_records(partition: int, n: int, rng: random.Random) -> list[Record]:
    """Task ``partition``'s records in merged order: events, their outcomes 0-40 records later
    (some never, some twice, some of unknown keys, some first), bad lines, timestamps."""
    lines: list[tuple[str, bytes]] = []
    late: dict[int, list[tuple[str, bytes]]] = {}
    for i in range(n):
        key = f"p{partition}-{i}"
        roll = rng.random()
        if roll < 0.06:
            lines.append((rng.choice((EVENTS, LABELS)), b"{not json"))
        elif roll < 0.1:
            lines.append((LABELS, json.dumps({"id": f"unknown-{partition}-{i}", "y": 1}).encode()))
        event = json.dumps({"id": key, "a": rng.uniform(-1, 1), "b": rng.uniform(-1, 1),
                            f"c{rng.randrange(4)}": 1.0}).encode()  # fmt: skip
        outcome = json.dumps({"id": key, "y": int(rng.random() < 0.5)}).encode()
        if rng.random() < 0.1:  # the outcome first
            lines += [(LABELS, outcome), (EVENTS, event)]
            continue
        lines.append((EVENTS, event))
        if rng.random() < 0.08:
            continue  # never labelled
        due = len(lines) + rng.randrange(40)
        late.setdefault(due, []).append((LABELS, outcome))
        if rng.random() < 0.05:
            late.setdefault(due + 3, []).append((LABELS, outcome))
        lines += late.pop(len(lines), [])
    for due in sorted(late):
        lines += late[due]
    offsets = {EVENTS: 0, LABELS: 0}
    out = []
    for i, (topic, value) in enumerate(lines):
        out.append(Record(value, Position(topic, offsets[topic], partition),
                          timestamp=1_000 * partition + i))  # fmt: skip
        offsets[topic] += 1
    return out


def interleaved(tasks: dict[int, list[Record]], rng: random.Random) -> list[list[Record]]:
    """Every task's records in its own order, the tasks interleaved at random, in batches."""
    heads = {p: 0 for p in tasks}
    order: list[Record] = []
    while heads:
        p = rng.choice(sorted(heads))
        take = rng.randrange(1, 8)
        order += tasks[p][heads[p] : heads[p] + take]
        heads[p] += take
        if heads[p] >= len(tasks[p]):
            del heads[p]
    return [order[i : i + 17] for i in range(0, len(order), 17)]


def engine(tasks: JoinTasks | None = None, join: PendingJoin | None = None) -> Engine:
    return Engine(Perceptron(), make_parser("jsonl", "y", "id"), Outputs(MemorySink()),
                  join=join, join_tasks=tasks, dense=False)  # fmt: skip


def new_tasks() -> JoinTasks:
    return JoinTasks(MAX_PENDING, LABEL_WAIT, EVENTS)


def state(store: PendingJoin) -> dict:
    """A store's entries, without the served predictions (the model's, which the tasks
    share in one run and do not in the references)."""
    got = store.get_state()
    for event in got["events"]:
        event[7] = None
    return got


def reference(records: list[Record]) -> tuple[dict, int, dict]:
    """The ordinary join on one task's records: its store, clock and counts."""
    run = engine(join=PendingJoin(MAX_PENDING, LABEL_WAIT))
    run.run(Batches([records[i : i + 17] for i in range(0, len(records), 17)]))
    assert run.delayed is not None and run.stats.join is not None
    return state(run.delayed.pending), run.stats.records, counts(run)


def counts(run: Engine) -> dict:
    join = run.stats.join
    assert join is not None
    return fields(join)


def fields(join: JoinCounts) -> dict:
    return {name: getattr(join, name) for name in JOIN_FIELDS}


def summed(all_counts: list[dict]) -> dict:
    out: dict = {}
    for c in all_counts:
        for name, value in c.items():
            if isinstance(value, list):
                out[name] = [a + b for a, b in zip(out.get(name, [0] * len(value)), value)]
            else:
                out[name] = out.get(name, 0) + value
    return out


def compacted(log: list[tuple[bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    """What compaction keeps: the last record of each key, tombstones dropped, in log order."""
    last = {key: i for i, (key, _value) in enumerate(log)}
    return [(k, v) for i, (k, v) in enumerate(log) if last[k] == i and v is not None]


@pytest.mark.parametrize("seed", range(4))
def test_each_task_joins_as_the_ordinary_join_on_its_records_alone(seed: int) -> None:
    rng = random.Random(seed)
    tasks = {p: task_records(p, 150, rng) for p in range(PARTITIONS)}
    joins = new_tasks()
    run = engine(joins)
    run.run(Batches(interleaved(tasks, rng)))
    references = {p: reference(records) for p, records in tasks.items()}
    for p, (store, clock, task_counts) in references.items():
        task = joins.tasks()[p]
        assert (state(task.store), task.records) == (store, clock), f"task {p}"
        assert fields(task.counts) == task_counts, f"task {p}"  # its own counts, its records'
    assert counts(run) == summed([c for _s, _k, c in references.values()])
    assert joins.events == sum(len(s["events"]) for s, _k, _c in references.values())
    assert counts(run)["expired"] > 0 and counts(run)["joined"] > 100  # the bounds were met


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_a_task_handed_over_at_any_commit_goes_on_as_if_never_moved(
    seed: int, compact: bool
) -> None:
    rng = random.Random(100 + seed)
    tasks = {p: task_records(p, 120, rng) for p in range(PARTITIONS)}
    batches = interleaved(tasks, rng)
    whole = new_tasks()
    engine(whole).run(Batches(batches))

    logs: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    joins = new_tasks()
    cuts = sorted(rng.sample(range(1, len(batches)), 3))
    start = 0
    workers = []  # what each owner's metrics counted
    for cut in [*cuts, len(batches)]:
        run = engine(joins)
        run.run(Batches(batches[start:cut]))
        for p in range(PARTITIONS):  # the commit: each task's changes to its partition
            logs[p] += joins.changes(p)
        workers.append(counts(run))
        start = cut
        joins = new_tasks()  # the next owner reads every task back
        for p in range(PARTITIONS):
            joins.restore(p, compacted(logs[p]) if compact else logs[p])
    for p in range(PARTITIONS):
        moved, stayed = joins.tasks()[p], whole.tasks()[p]
        assert (state(moved.store), moved.records, moved.store.time) == (
            state(stayed.store), stayed.records, stayed.store.time), f"task {p}"  # fmt: skip
        assert fields(moved.counts) == fields(stayed.counts), f"task {p}"
        assert any(key == TASK_KEY for key, _v in logs[p])
    # each owner counted what it joined, none what it read back: together, the whole run
    assert summed(workers) == summed([fields(t.counts) for t in whole.tasks().values()])
    assert fields(joins.counts) == fields(JoinCounts())


def test_a_task_with_nothing_new_writes_nothing() -> None:
    joins = new_tasks()
    task = joins.of(Position(EVENTS, 0, 1))
    task.store.add_event("k", {"f": 1.0}, 0, (EVENTS, 1), offset=0, now=task.tick())
    assert [key for key, _v in joins.changes(1)] == [b"k", TASK_KEY]
    assert joins.changes(1) == [] and joins.changes(2) == []


def _counted(**changes: int) -> dict:
    counts = JoinCounts()
    counts.events, counts.outcomes, counts.joined = 2, 1, 1
    counts.observe_delay(5)
    state = counts.get_state()
    state.update(changes)
    return state


@pytest.mark.parametrize("record, why", [
    ({"v": 3, "kind": "task", "records": 3, "time": None}, "version 2 task record"),
    ({"v": True, "kind": "task", "records": 3, "time": None}, "version 2 task record"),
    ({"v": 2, "kind": "task", "records": -1, "time": None}, "records"),
    ({"v": 2, "kind": "task", "records": 3, "time": 1.5}, "stream time"),
    ({"v": 2, "kind": "task", "records": 3, "time": None}, "corrupt join counters"),
    ({"v": 2, "kind": "task", "records": 3, "counts": _counted(served_mistakes=2)},
     "mistakes do not add up"),
    ({"v": 2, "kind": "task", "records": 3, "counts": _counted(joined=-1)}, "joined is -1"),
    ({"v": 2, "kind": "task", "records": 2, "counts": _counted()},
     "2 events and 1 outcomes in 2 records"),
])  # fmt: skip
def test_a_bad_task_record_is_refused_with_its_reason(record: dict, why: str) -> None:
    from stream_perceptron.errors import StateError

    joins = new_tasks()
    with pytest.raises(StateError, match=why):
        joins.restore(0, [(TASK_KEY, json.dumps(record).encode())])
    assert 0 not in joins.tasks()


def test_a_task_record_of_before_the_counts_restores_them_as_zero(caplog) -> None:
    joins = new_tasks()
    joins.restore(0, [(TASK_KEY, b'{"v":1,"kind":"task","records":3,"time":null}')])
    task = joins.tasks()[0]
    assert (task.records, fields(task.counts)) == (3, fields(JoinCounts()))
    assert "before tasks kept their counts" in caplog.text
    good = {"v": 2, "kind": "task", "records": 3, "time": None, "counts": _counted()}
    joins.restore(0, [(TASK_KEY, json.dumps(good).encode())])
    assert (joins.tasks()[0].counts.events, joins.tasks()[0].counts.delay_sum) == (2, 5)


def test_a_workers_counts_only_grow_as_its_tasks_come_and_go() -> None:
    """Its metrics are counters: a task given up keeps what this worker counted in it, and
    a task taken (read back) adds only what is counted after."""
    joins = new_tasks()
    task = joins.of(Position(EVENTS, 0, 1))
    task.tick()
    task.counts.events += 1
    log = joins.changes(1)
    task.counts.events += 2  # counted, not committed
    assert joins.counts.events == 3
    joins.drop(1)
    assert joins.counts.events == 3 and joins.tasks() == {}
    joins.restore(1, log)  # taken again from its last commit: its own count 1
    assert (joins.tasks()[1].counts.events, joins.counts.events) == (1, 3)
    joins.tasks()[1].counts.events += 1
    joins.restore(1, log)  # read back again while held: what it counted stays counted
    assert (joins.tasks()[1].counts.events, joins.counts.events) == (1, 4)


def test_the_metrics_see_the_sums_of_the_tasks_and_their_bounds() -> None:
    joins = new_tasks()
    for p in (0, 2):
        task = joins.of(Position(EVENTS, 0, p))
        task.store.add_event(f"k{p}", {"f": 1.0}, 0, (EVENTS, p), offset=0, now=task.tick())
    task.store.add_outcome("o", 1, b"{}", (LABELS, 2), 0, now=task.tick())
    assert (joins.events, joins.outcomes, len(joins)) == (2, 1, 3)
    assert joins.max_pending == 2 * MAX_PENDING  # each task's bound, two tasks held


def test_a_join_of_tasks_is_refused_on_the_block_path() -> None:
    with pytest.raises(ValueError, match="record by record"):
        Engine(Perceptron(), make_parser("jsonl", "y", "id"), join_tasks=new_tasks(), dense=True)


def test_a_workers_metrics_and_summary_read_what_its_tasks_counted() -> None:
    from stream_perceptron.metrics.collector import EngineCollector

    rng = random.Random(7)
    tasks = {p: task_records(p, 60, rng) for p in range(PARTITIONS)}
    joins = new_tasks()
    run = engine(joins)
    run.run(Batches(interleaved(tasks, rng)))
    total = JoinCounts()
    for task in joins.tasks().values():
        total.add(task.counts)
    scraped = {s.name: s.value for m in EngineCollector(run).collect() for s in m.samples}
    assert scraped["stream_perceptron_joined_examples_total"] == total.joined > 0
    assert scraped["stream_perceptron_expired_events_total"] == total.expired > 0
    assert scraped["stream_perceptron_label_delay_records_sum"] == total.delay_sum
    summary = run.stats.summary()["join"]
    assert (summary["events"], summary["served_mistakes"]) == (total.events, total.served_mistakes)
    assert run.stats.records == sum(len(r) for r in tasks.values())
