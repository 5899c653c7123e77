"""``--join-key`` (issue 44, stdin and files): events predicted at once, learned when their
outcome comes; the bounds; the counters; kill -9 and --resume.

The proof test holds the CLI against a reference written here with its own dicts and queues
(not the engine's :class:`~stream_perceptron.join.PendingJoin`) and the project's Python
``Perceptron`` (``predict_one`` then ``learn_one``, applied when each outcome comes).
"""

from __future__ import annotations

import json
import random
import tracemalloc
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import kill_9_and_resume, model_of, run_cli

from connectors import MemorySink, MemorySource, Position, Record
from stream_perceptron import Perceptron
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.errors import StateError
from stream_perceptron.formats import make_parser
from stream_perceptron.join import DELAY_BUCKETS, DELAY_SECONDS_BUCKETS, PendingJoin

# -- the stream -------------------------------------------------------------------------------


def delayed_stream(n_events: int, seed: int = 1, max_late: int = 5000) -> list[dict[str, Any]]:
    """JSON objects: ``n_events`` events (key ``id``, 5 features), each labelled 0 to
    ``max_late`` records later (3 % of outcomes come up to 50 records before their event), 5 %
    never, 2 % outcomes of keys no event has, 1 % outcomes sent twice; and 1 % records with
    features and a label (learned at once), 1 % events without a key (predicted only), some
    integer keys (an outcome names them as text half the time)."""
    rng = random.Random(seed)
    timed: list[tuple[float, int, dict[str, Any]]] = []
    seq = 0

    def put(t: float, obj: dict[str, Any]) -> None:
        nonlocal seq
        timed.append((t, seq, obj))
        seq += 1

    w = [rng.gauss(0, 1) for _ in range(5)]
    for i in range(n_events):
        x = {f"f{j}": round(rng.gauss(0, 1), 6) for j in range(5)}
        y = int(sum(a * b for a, b in zip(w, x.values())) + rng.gauss(0, 0.3) > 0)
        t = 2.0 * i  # about two records an event: delays in records are twice these
        r = rng.random()
        if r < 0.01:
            put(t, {**x, "y": y, "id": f"inline{i}"})
            continue
        if r < 0.02:
            put(t, dict(x))
            continue
        key: Any = i if rng.random() < 0.3 else f"k{i}"
        put(t, {"id": key, **x})
        if rng.random() < 0.05:
            continue  # never labelled
        outcome_key = str(key) if isinstance(key, int) and rng.random() < 0.5 else key
        late = -rng.uniform(0, 50) if rng.random() < 0.03 else rng.uniform(0, max_late)
        put(t + late, {"id": outcome_key, "y": y})
        if rng.random() < 0.01:
            put(t + late + rng.uniform(0, max_late), {"id": outcome_key, "y": 1 - y})
    for j in range(int(0.02 * n_events)):
        put(rng.uniform(0, 2.0 * n_events), {"id": f"unknown{j}", "y": rng.randint(0, 1)})
    timed.sort(key=lambda item: (item[0], item[1]))
    return [obj for _, _, obj in timed]


def to_lines(objs: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(obj) + "\n" for obj in objs).encode()


# -- the reference ----------------------------------------------------------------------------


class Reference:
    """The join as the issue words it, over plain dicts and queues of (arrival, key)."""

    def __init__(self, max_pending: int, label_wait: int) -> None:
        self.max_pending, self.wait = max_pending, label_wait
        self.model = Perceptron()
        self.events: dict[str, tuple[int, dict[str, float], Any]] = {}
        self.outcomes: dict[str, tuple[int, Any]] = {}
        self.joined: dict[str, int] = {}
        self.queues: dict[str, deque[tuple[int, str]]] = {
            "events": deque(), "outcomes": deque(), "joined": deque()
        }  # fmt: skip
        self.lines: list[tuple[int, Any, Any, Any]] = []  # offset, prediction, label, mistake
        self.n = dict.fromkeys(("learned", "mistakes", "unlabelled", "events", "outcomes",
                                "joined", "served_mistakes", "expired", "unmatched_outcome",
                                "duplicate_outcome", "duplicate_event", "waiting"), 0)  # fmt: skip
        self.delays: list[int] = []
        self.pairs: list[tuple[int, Any]] = []  # each joined pair: its event's offset, label

    def _live(self, name: str) -> dict[str, Any]:
        return {"events": self.events, "outcomes": self.outcomes, "joined": self.joined}[name]

    def _front(self, name: str) -> tuple[int, str] | None:
        """The oldest live entry of a queue (stale ones dropped)."""
        queue, live = self.queues[name], self._live(name)
        while queue:
            arrival, key = queue[0]
            entry = live.get(key)
            if entry is not None and (entry if name == "joined" else entry[0]) == arrival:
                return queue[0]
            queue.popleft()
        return None

    def _drop(self, name: str, key: str) -> None:
        del self._live(name)[key]
        self.n["expired" if name == "events" else "unmatched_outcome"] += 1

    def _put(self, name: str, key: str, entry: Any, now: int) -> None:
        self._live(name)[key] = entry
        self.queues[name].append((now, key))

    def _remember(self, key: str, now: int) -> None:
        self.joined.pop(key, None)
        self._put("joined", key, now, now)

    def _learn(self, x: dict[str, float], y: Any) -> Any:
        prediction = self.model.predict_one(x)
        self.model.learn_one(x, y)
        self.n["learned"] += 1
        self.n["mistakes"] += prediction != y
        return prediction

    def _served(self, served: Any, y: Any, delay: int, event: int) -> None:
        self.n["joined"] += 1
        self.n["served_mistakes"] += served != y
        self.delays.append(delay)
        self.pairs.append((event, y))

    def record(self, now: int, offset: int, obj: dict[str, Any]) -> None:
        for name in ("events", "outcomes", "joined"):
            while (front := self._front(name)) is not None and front[0] < now - self.wait:
                if name == "joined":
                    del self.joined[front[1]]
                else:
                    self._drop(name, front[1])
        raw = obj.get("id")
        key = None if raw is None else str(raw)
        y = obj.get("y")
        x = {k: float(v) for k, v in obj.items() if k not in ("id", "y")}
        if key is None or (y is not None and x):
            if y is None:
                self.n["unlabelled"] += 1
                self.lines.append((offset, self.model.predict_one(x), None, None))
            else:
                p = self._learn(x, y)
                self.lines.append((offset, p, y, p != y))
            return
        if y is None:
            self.n["events"] += 1
            if key in self.outcomes:
                _, label = self.outcomes.pop(key)
                self._remember(key, now)
                p = self._learn(x, label)
                self.lines.append((offset, p, label, p != label))
                self._served(p, label, 0, offset)
                return
            p = self.model.predict_one(x)
            self.lines.append((offset, p, None, None))
            self.n["waiting"] += 1
            if key in self.events:
                self.n["duplicate_event"] += 1
                return
            self.joined.pop(key, None)
            self._put("events", key, (now, x, p, offset), now)
        else:
            self.n["outcomes"] += 1
            if key in self.events:
                arrival, ex, served, event = self.events.pop(key)
                self._remember(key, now)
                self._learn(ex, y)
                self._served(served, y, now - arrival, event)
                return
            self.n["waiting"] += 1
            if key in self.outcomes or key in self.joined:
                self.n["duplicate_outcome"] += 1
                return
            self._put("outcomes", key, (now, y), now)
        while len(self.events) + len(self.outcomes) > self.max_pending:
            e, o = self._front("events"), self._front("outcomes")
            if o is None or (e is not None and e[0] <= o[0]):
                self._drop("events", e[1])  # type: ignore[index]
            else:
                self._drop("outcomes", o[1])
        while len(self.joined) > self.max_pending:
            del self.joined[self._front("joined")[1]]  # type: ignore[index]

    def buckets(self) -> list[int]:
        counts = [0] * (len(DELAY_BUCKETS) + 1)
        for d in self.delays:
            counts[next((i for i, b in enumerate(DELAY_BUCKETS) if d <= b), -1)] += 1
        return counts


def reference_of(objs: list[dict[str, Any]], max_pending: int, label_wait: int) -> Reference:
    ref = Reference(max_pending, label_wait)
    for i, obj in enumerate(objs):
        ref.record(i, i, obj)
    return ref


COUNTERS = ("events", "outcomes", "joined", "served_mistakes", "expired", "unmatched_outcome",
            "duplicate_outcome", "duplicate_event")  # fmt: skip


def check_against(ref: Reference, summary: dict[str, Any], predictions: bytes) -> None:
    """The CLI's summary and prediction lines against the reference, every counter exact."""
    n = ref.n
    join = summary["join"]
    assert {k: join[k] for k in COUNTERS} == {k: n[k] for k in COUNTERS}
    assert (summary["learned"], summary["mistakes"], summary["unlabelled"]) == (
        n["learned"], n["mistakes"], n["unlabelled"]
    )
    assert summary["records"] == n["learned"] + n["unlabelled"] + n["waiting"]
    assert list(join["delay_buckets"].values()) == ref.buckets()
    assert join["delay_sum"] == sum(ref.delays)
    got = [json.loads(line) for line in predictions.splitlines()]
    want = [
        {"position": {"source": "stdin", "offset": o}, "prediction": p,
         **({} if y is None else {"label": y, "mistake": m})}
        for o, p, y, m in ref.lines
    ]  # fmt: skip
    assert len(got) == len(want)
    assert got == want


# -- the proof --------------------------------------------------------------------------------


def test_stdin_stream_with_late_lost_unknown_and_twice_sent_outcomes_equals_the_reference(
    tmp_path: Path,
) -> None:
    objs = delayed_stream(30_000, seed=7)
    wait = 8000  # outcomes come up to about 10,000 records late: some of them expire
    ref = reference_of(objs, max_pending=100_000, label_wait=wait)
    ck, preds, summary = tmp_path / "ck.json", tmp_path / "preds.jsonl", tmp_path / "s.json"
    proc = run_cli("run", "--format", "jsonl", "--join-key", "id", "--label-wait", str(wait),
                   "--checkpoint", str(ck), "--predictions", str(preds), "--summary-json",
                   str(summary), stdin=to_lines(objs))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    n = ref.n
    # the stream holds every case, so each part of the join is exercised
    assert min(n["expired"], n["unmatched_outcome"], n["duplicate_outcome"], n["joined"]) > 100
    assert sum(d == 0 for d in ref.delays) > 100  # outcomes that came before their event
    check_against(ref, json.loads(summary.read_text()), preds.read_bytes())
    assert model_of(ck).get_state() == ref.model.get_state()
    pending = json.loads(ck.read_text())["join"]
    assert {e[0] for e in pending["events"]} == set(ref.events)
    assert {o[0] for o in pending["outcomes"]} == set(ref.outcomes)


def test_kill_9_and_resume_give_the_uninterrupted_model_predictions_counters_and_pending(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_bytes(to_lines(delayed_stream(50_000, seed=3, max_late=2000)))
    kill_9_and_resume(tmp_path, data, ["--join-key", "id", "--label-wait", "3000"])
    resumed = json.loads((tmp_path / "ck.json").read_text())
    uninterrupted = json.loads((tmp_path / "whole.json").read_text())
    assert resumed["schema_version"] == 3
    assert resumed["join"] == uninterrupted["join"]
    assert resumed["stats"]["join"]["joined"] > 40_000


# -- the bounds and the cases, on the engine ---------------------------------------------------


def run_engine(lines: list[str], max_pending: int = 100, label_wait: int = 100,
               fmt: str = "jsonl") -> tuple[Engine, MemorySink, MemorySink]:  # fmt: skip
    preds, dead = MemorySink(), MemorySink()
    engine = Engine(Perceptron(), make_parser(fmt, "y", "id"), Outputs(preds, dead),
                    join=PendingJoin(max_pending, label_wait))  # fmt: skip
    engine.run(MemorySource([line.encode() for line in lines]))
    return engine, preds, dead


def ev(key: Any, a: float = 1.0) -> str:
    return json.dumps({"id": key, "a": a})


def out(key: Any, y: Any = 1) -> str:
    return json.dumps({"id": key, "y": y})


def reasons(dead: MemorySink) -> list[tuple[int, str]]:
    return [(d["position"]["offset"], d["reason"]) for d in map(json.loads, dead.lines)]


def test_max_pending_drops_the_oldest_events_and_outcomes() -> None:
    lines = [ev("a"), out("z"), ev("b"), ev("c"), out("b"), out("c"), ev("d"), out("a"), ev("e")]
    engine, preds, dead = run_engine(lines, max_pending=3)
    join = engine.stats.join
    # at "c" four wait: event "a" goes; at "e" outcome "z" goes (out("a") came too late)
    assert (join.expired, join.unmatched_outcome, join.joined) == (1, 1, 2)
    assert reasons(dead) == [(0, "no_outcome"), (1, "unmatched_outcome")]
    assert json.loads(dead.lines[0])["record"] == '{"id": "a", "a": 1.0}'
    assert engine.learner.n_seen == 2 and len(preds.lines) == 5
    assert (engine.delayed.pending.events, engine.delayed.pending.outcomes) == (2, 1)


def test_label_wait_is_counted_in_records_inclusive() -> None:
    filler = [ev(f"f{i}") for i in range(9)]
    on_time = [ev("a"), *filler, out("a")]  # the outcome 10 records after its event
    late = [ev("b"), *filler, ev("f9"), out("b")]  # 11 records after
    engine, _, dead = run_engine([*on_time, *late], label_wait=10)
    join = engine.stats.join
    assert join.joined == 1 and engine.learner.n_seen == 1
    assert (join.expired, join.unmatched_outcome) == (1 + 9, 0)  # "b" and the first fillers
    assert (11, "no_outcome") in reasons(dead)  # out("b") waits now for another "b"
    assert (engine.delayed.pending.outcomes, list(join.delay_buckets[:3])) == (1, [0, 0, 1])


def test_unmatched_outcomes_expire_and_are_dead_lettered() -> None:
    engine, _, dead = run_engine([out("ghost", 0), *[ev(f"e{i}") for i in range(4)]],
                                 label_wait=2)  # fmt: skip
    assert engine.stats.join.unmatched_outcome == 1
    assert reasons(dead)[0] == (0, "unmatched_outcome")
    assert json.loads(dead.lines[0])["record"] == out("ghost", 0)
    assert engine.learner.n_seen == 0


def test_the_first_outcome_wins_and_later_ones_are_duplicates() -> None:
    lines = [ev("a", 2.0), out("a", 1), out("a", 0), out("b", 0), out("b", 1), ev("b", -1.0)]
    engine, preds, _ = run_engine(lines)
    join = engine.stats.join
    assert join.duplicate_outcome == 2 and join.joined == 2
    assert engine.learner.n_seen == 2
    reference = Perceptron()
    reference.learn_one({"a": 2.0}, 1)
    reference.learn_one({"a": -1.0}, 0)
    assert engine.learner.get_state() == reference.get_state()
    # the outcome that came first: its event's line carries the label, the only line for "b"
    assert json.loads(preds.lines[-1])["label"] == 0 and len(preds.lines) == 2


def test_outcomes_are_scored_against_the_served_prediction_and_learned_by_the_model_now() -> None:
    # "e" is served by a model that learned "c"; by its outcome the model has learned "d" too;
    # "g" is served after "e" is learned, and its outcome comes after "h"
    lines = [json.dumps({"id": "c", "a": 1.0, "y": 1}), ev("e", 1.0),
             json.dumps({"id": "d", "a": 1.0, "y": 0}), out("e", 1),
             ev("g", 1.0), json.dumps({"id": "h", "a": 1.0, "y": 0}), out("g", 0)]  # fmt: skip
    engine, preds, _ = run_engine(lines)
    reference, one = Perceptron(), {"a": 1.0}
    reference.learn_one(one, 1)
    served_e = reference.predict_one(one)
    reference.learn_one(one, 0)
    now_e = reference.predict_one(one)
    reference.learn_one(one, 1)
    served_g = reference.predict_one(one)
    reference.learn_one(one, 0)
    now_g = reference.predict_one(one)
    reference.learn_one(one, 0)
    # "e": right when served, wrong by its outcome; "g": wrong when served, right by then
    assert (served_e, now_e, served_g, now_g) == (1, 0, 1, 0)
    assert [json.loads(preds.lines[i])["prediction"] for i in (1, 3)] == [served_e, served_g]
    join = engine.stats.join
    assert (join.joined, join.served_mistakes) == (2, 1)
    assert engine.stats.mistakes == 4  # "c", "d", "h" (each learned at once) and "e"
    assert engine.learner.get_state() == reference.get_state()


def test_csv_keys_integer_and_text_keys_and_records_without_a_key() -> None:
    lines = ["id,a,b,y", "7,1,2,", "x,3,,", "7,,,1", ",1,1,", ",,,1", "x,,,0"]
    engine, preds, dead = run_engine(lines, fmt="csv")
    stats = engine.stats
    assert (stats.join.joined, stats.unlabelled, dict(stats.invalid)) == (
        2, 1, {"missing_join_key": 1}
    )
    assert reasons(dead) == [(5, "missing_join_key")]
    assert len(preds.lines) == 3
    json_engine, _, _ = run_engine([ev(17), out("17"), ev("q"), json.dumps({"id": 1.5, "y": 1})])
    assert json_engine.stats.join.joined == 1
    assert dict(json_engine.stats.invalid) == {"bad_join_key": 1}


def test_records_are_counted_once_each() -> None:
    lines = [ev("a"), ev("a"), out("a"), out("a"), out("q"), json.dumps({"a": 1.0})]
    engine, _, _ = run_engine(lines)
    stats = engine.stats
    assert stats.records == len(lines)
    assert (stats.join.duplicate_event, stats.join.duplicate_outcome) == (1, 1)


def test_the_pending_state_round_trips_and_a_corrupt_one_is_refused() -> None:
    engine, _, _ = run_engine([ev("a", 0.1), out("b", True), ev(3, 1e-300), out("a"), ev("c")])
    state = json.loads(json.dumps(engine.delayed.pending.get_state()))
    again = PendingJoin(100, 100)
    again.load_state(state)
    assert again.get_state() == state
    assert again.take_event("3", now=9).features() == {"a": 1e-300}
    # a checkpoint written before the timestamps (an event of 8 items, an outcome of 7) loads
    old = {**state, "events": [e[:8] for e in state["events"]],
           "outcomes": [o[:7] for o in state["outcomes"]]}  # fmt: skip
    again.load_state(old)
    assert again.get_state() == state
    for broken in ({**state, "events": [[*state["events"][0][:8], "soon"]]},
                   {**state, "outcomes": [[*state["outcomes"][0][:7], 1.5]]},
                   {**state, "events": [state["events"][0][:5]]},
                   {**state, "events": [[*state["events"][0][:6], [float("nan")], 1]]},
                   {**state, "events": state["events"] * 2}, {**state, "shapes": "x"}):  # fmt: skip
        with pytest.raises(StateError):
            PendingJoin(100, 100).load_state(json.loads(json.dumps(broken)))


class _Stamped:
    """A source of one batch of records with timestamps (as a Kafka source gives them)."""

    name = "stamped"

    def __init__(self, lines: list[tuple[str, int | None]]) -> None:
        self.lines = lines

    def batches(self):
        yield [Record(line.encode(), Position("t", i, 0), None, None, stamp)
               for i, (line, stamp) in enumerate(self.lines)]  # fmt: skip

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def _stamped_engine(join: PendingJoin) -> tuple[Engine, MemorySink, MemorySink]:
    preds, dead = MemorySink(), MemorySink()
    engine = Engine(Perceptron(), make_parser("jsonl", "y", "id"), Outputs(preds, dead),
                    join=join, dense=False)  # the record path, as on Kafka
    return engine, preds, dead


def test_the_label_delay_in_seconds_comes_from_the_records_timestamps() -> None:
    """Event to outcome in the stream's time (the largest timestamp read: a late record counts
    from it), bucketed in seconds; 0 for an outcome that came first; a resumed join keeps the
    waiting event's stamp and the stream's time."""
    lines = [(ev("a"), 1_000), (ev("b"), 2_000), (out("c"), 2_500), (out("a"), 1_250),
             (ev("c"), 9_000), (ev("d"), None), (out("d"), 9_100), (ev("e"), 10_000),
             (out("b"), 9_502_000)]  # fmt: skip
    engine, _, _ = _stamped_engine(PendingJoin(100, 100))
    engine.run(_Stamped(lines[:-1]))
    join = engine.stats.join
    # a: late, 2,500 - 1,000; c: the outcome first (0); d: its event stamped 9,000, the
    # stream's time, though it had no timestamp
    assert (join.joined, join.delay_ms_sum) == (3, 1_500 + 0 + 100)
    assert join.delay_ms_buckets[:5] == [1, 1, 0, 0, 1]  # 0; (0, 0.1 s]; (1 s, 5 s]
    state = json.loads(json.dumps(engine.delayed.pending.get_state()))
    assert [e[-1] for e in state["events"]] == [2_000, 10_000]
    assert (state["clock"], state["time"]) == ("records", 10_000)
    again = PendingJoin(100, 100)
    again.load_state(state)
    assert again.time == 10_000 and again.take_event("b", now=9).stamp == 2_000
    # b's outcome after 9,500 s (in (3600, 21600]); e still waits
    engine.run(_Stamped(lines[-1:]))
    assert (join.joined, join.delay_ms_sum) == (4, 9_501_600)
    want = [0] * (len(DELAY_SECONDS_BUCKETS) + 1)
    for seconds in (1.5, 0, 0.1, 9_500):
        want[next(i for i, b in enumerate(DELAY_SECONDS_BUCKETS) if seconds <= b)] += 1
    assert join.delay_ms_buckets == want
    summary = join.summary()
    assert summary["delay_seconds_sum"] == 9_501.6
    assert list(summary["delay_seconds_buckets"].values()) == want


def test_label_wait_as_a_duration_counts_the_stream_time_inclusive() -> None:
    """``--label-wait 5s``: an entry goes once the stream's time is more than 5,000 ms past
    its stamp; a late record is stamped with the stream's time; a checkpoint of one clock is
    refused by a join of the other."""
    lines = [(ev("a"), 0), (ev("b"), 3_000), (out("a"), 5_000), (ev("c"), 6_000),
             (ev("late"), 1_000), (out("b"), 8_001), (out("c"), 11_000),
             (out("late"), 11_001)]  # fmt: skip
    engine, _, dead = _stamped_engine(PendingJoin(100, 5_000, by_time=True))
    engine.run(_Stamped(lines[:5]))
    stamps = [e[-1] for e in engine.delayed.pending.get_state()["events"]]
    assert stamps == [3_000, 6_000, 6_000]  # b, c, and late stamped with the stream's time
    engine.run(_Stamped(lines[5:]))
    join = engine.stats.join
    # a: 5,000 ms, on time; b: expired at 8,001; c: 5,000 ms; late: stamped 6,000, its
    # outcome 5,001 ms after that: expired; the outcomes of b and late wait
    assert (join.joined, join.expired, join.delay_ms_sum) == (2, 2, 10_000)
    assert [r for _, r in reasons(dead)] == ["no_outcome", "no_outcome"]
    assert "--label-wait 5 s" in json.loads(dead.lines[0])["detail"]
    assert (engine.delayed.pending.outcomes, engine.delayed.pending.time) == (2, 11_001)
    state = json.loads(json.dumps(engine.delayed.pending.get_state()))
    assert state["clock"] == "time"
    with pytest.raises(StateError, match="in a duration, this run in records"):
        PendingJoin(100, 5_000).load_state(state)
    again = PendingJoin(100, 5_000, by_time=True)
    again.load_state(state)
    assert again.get_state() == state


def test_pending_features_take_at_most_32_bytes_a_value() -> None:
    """Measured as the engine keeps them: each event parsed (its names, floats and key made
    afresh), kept, and the parsed record dropped."""
    names = [f"feature_{j}" for j in range(20)]
    rng = random.Random(0)
    lines = [json.dumps({"id": f"event-{i:08d}", **{n: rng.random() for n in names}}).encode()
             for i in range(20_000)]  # fmt: skip
    parser = make_parser("jsonl", "y", "id")
    join = PendingJoin(10**6, 10**9)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i, line in enumerate(lines):
        key, (x, _) = parser.parse_keyed(line)  # type: ignore[attr-defined]
        join.add_event(key, x, 1, ("stdin", None), i, i)
    del key, x
    per_value = (tracemalloc.get_traced_memory()[0] - before) / (len(lines) * len(names))
    tracemalloc.stop()
    assert per_value <= 32, f"{per_value:.1f} bytes a pending feature value"


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [(["--format", "libsvm", "--join-key", "id"], "--join-key needs named fields"),
     (["--format", "csv", "--max-pending", "5"], "--max-pending needs --join-key"),
     (["--format", "csv", "--label-wait", "5"], "--label-wait needs --join-key"),
     (["--format", "csv", "--join-key", "y"], "the key is not the label"),
     (["--format", "csv", "--join-key", "id", "--label-wait", "30m"],
      "--label-wait as a duration counts the records' time"),
     (["--format", "csv", "--join-key", "id", "--label-wait", "soon"],
      "neither a whole number of records nor a duration"),
     (["--source", "kafka", "--format", "jsonl", "--join-key", "id"],
      "--join-key with --source kafka needs --labels-topic")],
)  # fmt: skip
def test_flags_that_cannot_work_are_usage_errors(args: list[str], message: str) -> None:
    proc = run_cli("run", *args, stdin=b"")
    assert proc.returncode == 2 and message in proc.stderr.decode(), proc.stderr.decode()


def test_a_join_checkpoint_shows_what_waits_and_resumed_without_join_key_exits_2(
    tmp_path: Path,
) -> None:
    data, ck = tmp_path / "d.jsonl", tmp_path / "ck.json"
    data.write_bytes(to_lines([{"id": "a", "f": 1.0}]))
    assert run_cli("run", "--input", str(data), "--join-key", "id", "--checkpoint",
                   str(ck)).returncode == 0  # fmt: skip
    assert b"waiting      1 events, 0 outcomes" in run_cli("inspect", str(ck)).stdout
    proc = run_cli("run", "--input", str(data), "--checkpoint", str(ck), "--resume")
    assert proc.returncode == 2 and "give --join-key" in proc.stderr.decode()


def test_the_bundled_delayed_example_joins_every_event(tmp_path: Path) -> None:
    data = run_cli("example-data", "phishing", "--delayed", "--seed", "3")
    assert data.returncode == 0, data.stderr.decode()
    summary = tmp_path / "s.json"
    proc = run_cli("run", "--format", "csv", "--join-key", "id", "--summary-json", str(summary),
                   stdin=data.stdout)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    s = json.loads(summary.read_text())
    assert (s["records"], s["learned"], s["join"]["joined"], s["join"]["expired"]) == (
        2500, 1250, 1250, 0
    )
    assert sum(s["join"]["delay_buckets"].values()) == 1250 and s["join"]["delay_sum"] > 1250
    assert s["accuracy"] > 0.8


def test_a_pair_the_model_refuses_is_a_bad_record_and_is_gone() -> None:
    lines = [json.dumps({"id": "i", "a": 1.0, "y": 0}), json.dumps({"id": "j", "a": 2.0, "y": 1}),
             ev("e"), out("e", 7), out("f", 9), ev("f")]  # fmt: skip
    engine, preds, dead = run_engine(lines)
    stats = engine.stats
    assert dict(stats.invalid) == {"label_outside_encoding": 2}
    assert reasons(dead) == [(3, "label_outside_encoding"), (5, "label_outside_encoding")]
    assert (stats.join.joined, len(engine.delayed.pending), engine.learner.n_seen) == (0, 0, 2)
    assert len(preds.lines) == 3  # "f" completed a refused pair: no line, as a refused record
    assert stats.records == len(lines)
