"""The pending store's changelog (stream_perceptron.join.changelog): a log of the records of
the keys that changed, compacted or not, restores the same store, which then behaves as the
original on the records that follow."""

from __future__ import annotations

import random
from typing import Any

import pytest

from stream_perceptron.errors import StateError
from stream_perceptron.join import PendingJoin
from stream_perceptron.join.changelog import changes, decode, encode, restore, snapshot

Log = list[tuple[str, Any]]


def _canon(join: PendingJoin) -> dict[str, Any]:
    """The store's entries with their features by name (the shapes' numbering aside)."""
    state = join.get_state()
    shapes = state.pop("shapes")
    state["events"] = [[*e[:5], list(zip(shapes[e[5]], e[6])), *e[7:]] for e in state["events"]]
    return state


class _Driver:
    """Records of a random stream stepped through a join as the engine's step does: an event
    is kept or takes its outcome, an outcome takes its event, waits or is a duplicate; then
    the bounds."""

    def __init__(self, seed: int, by_time: bool) -> None:
        self.rng = random.Random(seed)
        self.by_time = by_time
        self.now = 0
        self.stamp = 1_700_000_000_000
        self.keys = [f"k{i}" for i in range(60)]
        self.names = [f"f{i}" for i in range(8)]

    def step(self, joins: list[PendingJoin]) -> None:
        rng, now = self.rng, self.now
        self.now += 1
        self.stamp += rng.choice((0, 0, 1, 7, 40))
        stamp = self.stamp - rng.choice((0, 0, 0, 30))  # some late records
        key = rng.choice(self.keys)
        is_event = rng.random() < 0.55
        width = rng.randint(1, 4)
        names = rng.sample(self.names, width)
        x = {n: rng.choice((0.5, -1.25, rng.uniform(-3, 3), 1e-300)) for n in names}
        label = rng.choice((0, 1, "a"))
        for join in joins:
            when = join.tick(stamp) if self.by_time else stamp
            if is_event:
                if join.has_event(key):
                    pass  # a duplicate event: predicted, not kept
                elif join.outcome_waiting(key):
                    join.take_outcome(key, now)
                else:
                    join.add_event(key, x, label, ("events", 0), now, now, when)
            elif join.has_event(key):
                join.take_event(key, now)
            elif not (join.outcome_waiting(key) or join.joined_recently(key)):
                join.add_outcome(key, label, f"{key},{label}".encode(), ("labels", 0), now,
                                 now, when)  # fmt: skip
            join.expire(now)
            join.overflow()


def _compacted(log: Log) -> Log:
    """What a compacted topic keeps: each key's last record, where it was written."""
    last = {key: i for i, (key, _) in enumerate(log)}
    return [item for i, item in enumerate(log) if last[item[0]] == i]


def _fresh(join: PendingJoin) -> PendingJoin:
    again = PendingJoin(join.max_pending, join.label_wait, join.by_time)
    again.time = join.time
    return again


@pytest.mark.parametrize("by_time", [False, True], ids=["records", "time"])
@pytest.mark.parametrize("seed", range(6))
def test_a_changelog_restores_the_store_that_then_behaves_the_same(seed: int, by_time: bool):
    driver = _Driver(seed, by_time)
    join = PendingJoin(max_pending=25, label_wait=150 if by_time else 40, by_time=by_time)
    join.track_changes()
    log: Log = []
    restores = 0
    for _ in range(1500):
        driver.step([join])
        if driver.rng.random() < 0.05:  # a commit: the changes go to the log as bytes
            log += [(key, encode(value)) for key, value in changes(join)]
            for kept in (log, _compacted(log)):
                again = _fresh(join)
                restore(again, [(key, decode(data)) for key, data in kept])
                assert _canon(again) == _canon(join)
                restores += 1
            if driver.rng.random() < 0.3:  # the next owner carries on from the log
                for _ in range(40):
                    driver.step([join, again])
                assert _canon(again) == _canon(join)
    assert restores > 50
    expired_and_joined = [key for key, data in log if data is None]
    assert expired_and_joined, "the stream never dropped a key: the tombstones go untested"


def test_a_snapshot_starts_a_changelog_from_a_store_not_tracked():
    driver = _Driver(7, by_time=False)
    join = PendingJoin(max_pending=30, label_wait=50)
    for _ in range(400):
        driver.step([join])
    assert len(join) and join.get_state()["joined"]
    log: Log = snapshot(join)
    join.track_changes()
    for _ in range(200):
        driver.step([join])
    log += changes(join)
    again = _fresh(join)
    restore(again, _compacted(log))
    assert _canon(again) == _canon(join)


def test_a_change_not_logged_is_seen():
    """The test above would pass on a store that logs nothing but adds: here an entry dropped
    by a bound must come back as a tombstone."""
    join = PendingJoin(max_pending=1, label_wait=100)
    join.track_changes()
    join.add_event("a", {"f": 1.0}, 1, ("events", 0), 0, 0)
    first = changes(join)
    join.add_event("b", {"f": 2.0}, 0, ("events", 0), 1, 1)
    assert [e.key for e in join.overflow()] == ["a"]
    b = first[0][1] | {"arrival": 1, "offset": 1, "served": 0, "values": "AAAAAAAAAEA="}
    assert changes(join) == [("b", b), ("a", None)]


def _good() -> dict[str, Any]:
    return {"v": 1, "kind": "event", "arrival": 3, "origin": ["events", 0], "offset": 3,
            "served": 1, "stamp": None, "names": ["f"], "values": "AAAAAAAA4D8="}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"v": 2}, "not a version 1"),
        ({"kind": "model"}, "not a version 1"),
        ({"values": "AAAAAAAA+H8="}, "not a finite number"),  # NaN's bits
        ({"values": "AAAAAAAA4D"}, "not 1 in base64"),
        ({"values": "AAAAAAAA4D8AAAAAAADgPw=="}, "not 1 in base64"),
        ({"values": 0.5}, "not 1 in base64"),
        ({"names": ["f", "f"], "values": "AAAAAAAA4D8AAAAAAADgPw=="}, "feature names"),
        ({"names": "f"}, "feature names"),
        ({"arrival": -1}, "arrival is -1"),
        ({"origin": ["events"]}, "origin"),
        ({"stamp": 1.5}, "not milliseconds"),
        ({"served": [1]}, "not a JSON scalar"),
        ({"kind": "outcome", "label": 1, "record": 5}, "not a string"),
        ({"kind": "joined", "at": "now"}, "at is 'now'"),
    ],
)
def test_a_bad_record_is_refused_and_leaves_the_store_empty(change: dict[str, Any], message: str):
    join = PendingJoin(max_pending=10, label_wait=10)
    log = [("ok", _good()), ("bad", _good() | change)]
    with pytest.raises(StateError, match=message):
        restore(join, log)
    assert len(join) == 0 and not join.get_state()["joined"]


def test_entries_out_of_order_are_refused():
    join = PendingJoin(max_pending=10, label_wait=10)
    with pytest.raises(StateError, match="not in the order they came"):
        restore(join, [("a", _good()), ("b", _good() | {"arrival": 1})])
    assert len(join) == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"v": 1, "v": 1}', "not JSON"),
        (b'{"x": NaN}', "not JSON"),
        (b"[1]", "not an object"),
        (b"\xff", "not JSON"),
        (b"[" * 100_000, "not JSON"),
    ],
)
def test_bytes_that_are_not_a_record_are_refused(data: bytes, message: str):
    with pytest.raises(StateError, match=message):
        decode(data)


def test_restore_needs_an_empty_store():
    join = PendingJoin(max_pending=10, label_wait=10)
    join.add_event("a", {"f": 1.0}, 1, ("events", 0), 0, 0)
    with pytest.raises(StateError, match="empty store"):
        restore(join, [])
