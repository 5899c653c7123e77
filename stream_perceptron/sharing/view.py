"""What a shared-model worker (or ``pull-model``) knows of the model topic: the latest valid
record of each key, every record checked before it is used.

Anyone who can write to the model topic can put anything there, and every worker reads it, so
nothing read is trusted (authorisation on the topic is what keeps strangers out; this is what
keeps one bad record from stopping or poisoning the group). A record is refused, counted by
reason (:attr:`ModelView.rejected`, the metric ``stream_perceptron_model_records_rejected_total``)
and logged once per reason when it:

* does not parse (:func:`~stream_perceptron.sharing.records.decode`: too large, not JSON, nested
  too deep, NaN or infinite numbers, another program's or schema version's, wrong fields);
* describes another model (learner or hyperparameters other than the group's: ``mismatch``);
* is a mixture that is not newer than the head (``stale``: the chain only moves forward), one
  that no learner state loads (``malformed``), or one that holds fewer examples or increments
  than the head (``implausible``);
* claims more than the group can have done (``implausible``): more examples than the partition
  records count, or weights larger than ``lr * R * n`` (the perceptron's own bound on how far
  ``n`` updates of inputs of norm at most ``R`` can move a weight vector).

A refused increment is never folded; the leader deletes it with a tombstone (:attr:`doomed`).
With the group's key (``--model-topic-key-file``, :attr:`ModelView.signer`), a record not
signed with it is refused before anything else (``unsigned``, ``bad_signature``).

**Replays** (``replayed``): a record the group signed, written again later by anyone with write
access to the topic, is refused when it goes back on what the view read before it (a
partition's offset or counts, a former head, an increment a mixture holds); what this covers
and what it does not (a copy read only after compaction) is in ``docs/ARCHITECTURE.md``,
"Replayed records".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from connectors import PositionKey
from stream_perceptron.errors import StreamPerceptronError
from stream_perceptron.sharing import Increment, MixError, Mixture, PartitionState
from stream_perceptron.sharing.bounds import as_delta, check_bound
from stream_perceptron.sharing.increments import Form, fold, fold_step, share_of
from stream_perceptron.sharing.records import (
    MAX_KEY_BYTES,
    MAX_RECORD_BYTES,
    MIXTURE_KEY,
    RecordFormatError,
    decode,
    increment_key,
    parse_increment_key,
)
from stream_perceptron.sharing.signing import RecordSigner
from stream_perceptron.sharing.states import Expected, learner_of, model_of

__all__ = ["ModelView"]

logger = logging.getLogger(__name__)

#: the steps of this many latest mixtures are kept (to place averaged increments made on them)
MIXTURE_STEPS = 64


@dataclass
class ModelView:
    """The latest valid record of each key of the model topic, as read so far.

    ``expected``: the learner and hyperparameters records must describe (a worker's own);
    ``None`` takes them from the first valid mixture read (``pull-model``).
    """

    partitions: dict[PositionKey, PartitionState] = field(default_factory=dict)
    #: per worker, per seq: its increments no mixture is known to hold, decoded when needed
    #: (only the leader and a restarting worker read them)
    increments: dict[str, dict[int, Increment | bytes]] = field(default_factory=dict)
    mixture: Mixture | None = None
    expected: Expected | None = None
    #: records refused, per reason
    rejected: Counter[str] = field(default_factory=Counter)
    #: keys of refused increments, for the leader to delete with tombstones
    doomed: set[str] = field(default_factory=set)
    #: the group's key: records not signed with it are refused (``None``: none are checked)
    signer: RecordSigner | None = None
    #: the steps of the latest mixtures read or written, by version (``MIXTURE_STEPS`` kept)
    mixture_steps: dict[int, Form] = field(default_factory=dict)
    #: who wrote the latest heads and when, by version (``MIXTURE_STEPS`` kept): a former
    #: head read again (the leader writes the head again after a stale mixture) is known, not
    #: refused as stale
    heads: dict[int, tuple[str, float]] = field(default_factory=dict)
    #: a mixture refused as stale was read after the head: compaction keeps a key's last
    #: record, that one, so the head's increments stay until the head is read again (the
    #: leader writes it again) or a newer one is
    stale_after_head: bool = False
    #: partitions whose last record read is a refused replay (compaction would keep it): their
    #: owner writes their record again
    replayed_partitions: set[PositionKey] = field(default_factory=set)
    #: per worker, the highest increment ``seq`` read, tombstones included (a restarted worker
    #: numbers on from it: a tombstone written again then never names a live increment)
    last_seq: dict[str, int] = field(default_factory=dict)

    @property
    def bad_records(self) -> int:
        """Records refused, all reasons."""
        return sum(self.rejected.values())

    def reject(self, error: RecordFormatError, key: bytes | str | None) -> None:
        """Count a refused record; the first of each reason is logged as a warning."""
        reason = getattr(error, "reason", "malformed")
        first = not self.rejected[reason]
        self.rejected[reason] += 1
        shown = key if not isinstance(key, bytes) else key[:80].decode("utf-8", "replace")
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "refused a model-topic record (key %r, reason %s): %s%s", shown, reason, error,
            "; further ones of this reason are counted in "
            "stream_perceptron_model_records_rejected_total" if first else "",
        )  # fmt: skip

    def ingest(
        self, records: list[tuple[bytes | None, bytes | None]], own: bool = False
    ) -> None:
        """Take records in log order; one that fails a check is counted and skipped. Mixtures
        are checked after the others: a compacted log can hold a mixture before the latest
        records of the partitions whose examples it counts. ``own``: records this worker
        committed itself (not read back: no signature to check)."""
        later: list[tuple[bytes | None, Mixture | tuple[str, int]]] = []
        for record in records:
            key, value = record
            with self._refusing(key):
                if self.signer is not None and not own:  # records read carry their headers
                    self._check_signature(record)
                taken = self._ingest(key, value)
                if taken is not None:
                    later.append((key, taken))
        for key, taken in later:  # in log order: an increment against the head before it
            with self._refusing(key):
                if not isinstance(taken, Mixture):
                    self._check_unheld(*taken)
                elif self._check_mixture(taken):
                    self.advance(taken)

    def advance(self, mixture: Mixture) -> None:
        """``mixture`` becomes the head; its step (when it has one that decodes) is kept for
        placing increments made on the mixtures before it."""
        self.mixture = mixture
        self.stale_after_head = False
        self.heads[mixture.version] = (mixture.worker, mixture.mixed_at)
        if mixture.step is not None:
            try:
                self.mixture_steps[mixture.version] = Form.decode(mixture.step)
            except MixError:
                pass  # only a finer placement of averaged increments is lost
        for version in [v for v in self.mixture_steps if v <= mixture.version - MIXTURE_STEPS]:
            del self.mixture_steps[version]
        for version in [v for v in self.heads if v <= mixture.version - MIXTURE_STEPS]:
            del self.heads[version]

    def lag(self, since: int) -> Form | None:
        """The weights' change from mixture ``since`` to the head (the steps kept of the
        mixtures after it; ``None``: none is known)."""
        head = self.mixture.version if self.mixture is not None else 0
        total: Form | None = None
        for version in range(since + 1, head + 1):
            step = self.mixture_steps.get(version)
            if step is not None:
                total = step if total is None else total.plus(step)
        return total

    def _check_signature(self, record: tuple[bytes | None, bytes | None]) -> None:
        """Refuse a record the group's key did not sign; an unsigned increment under a key no
        worker's held increment has is doomed (the leader deletes it, so that readers without
        the key do not fold it either; one under a held key is left: deleting it would delete
        the worker's)."""
        assert self.signer is not None
        key, value = record
        try:
            self.signer.check(key, value, getattr(record, "headers", None))
        except RecordFormatError as e:
            with suppress(RecordFormatError):
                named = parse_increment_key(key)
                if named is not None and named[1] not in self.increments.get(named[0], {}):
                    self.doomed.add(increment_key(*named))
            raise e from None

    @contextmanager
    def _refusing(self, key: bytes | None) -> Iterator[None]:
        try:
            yield
        except RecordFormatError as e:
            self.reject(e, key)
        except (StreamPerceptronError, ArithmeticError, LookupError, TypeError,
                ValueError, RecursionError) as e:  # fmt: skip
            # a record no check foresaw still never stops a worker
            self.reject(RecordFormatError(f"{type(e).__name__}: {e}"), key)

    def _ingest(
        self, key: bytes | None, value: bytes | None
    ) -> Mixture | tuple[str, int] | None:
        """Take a record; a mixture, or an increment's ``(worker, seq)``, is returned, to be
        checked once the batch is in."""
        if key is not None and len(key) > MAX_KEY_BYTES:
            raise RecordFormatError(f"a key of {len(key)} bytes", "bad_key")
        named = parse_increment_key(key)
        if named is not None:
            self.last_seq[named[0]] = max(named[1], self.last_seq.get(named[0], 0))
        if value is None:  # a tombstone: a mixture holds that increment
            if named is not None:
                self.increments.get(named[0], {}).pop(named[1], None)
            return None
        if named is not None:  # decoded (and checked) only when read: steps()
            if len(value) > MAX_RECORD_BYTES:
                raise RecordFormatError(f"{len(value)} bytes", "too_large")
            self.increments.setdefault(named[0], {})[named[1]] = value
            return named
        record = decode(value)
        expected_key = MIXTURE_KEY if isinstance(record, Mixture) else record.key
        if key is None or key.decode("utf-8", "replace") != expected_key:
            raise RecordFormatError(f"a {type(record).__name__} under another key")
        if isinstance(record, PartitionState):
            self._check_forward(record)
            self.partitions[(record.topic, record.partition)] = record
            self.replayed_partitions.discard((record.topic, record.partition))
        elif isinstance(record, Mixture):
            return record
        else:
            raise RecordFormatError("an increment under another key")
        return None

    # -- checks --------------------------------------------------------------------------------
    def _check_unheld(self, worker: str, seq: int) -> None:
        """Refuse (and doom) an increment read after a mixture that holds it: the leader
        mixes only increments it read, so such a record is an older one written again."""
        head = self.mixture
        if head is None or seq > head.included.get(worker, 0):
            return
        self.increments.get(worker, {}).pop(seq, None)
        self.doomed.add(increment_key(worker, seq))
        raise RecordFormatError(
            f"increment {seq} of {worker!r} read after mixture {head.version}, which holds it "
            "(an older record written again)", "replayed",
        )  # fmt: skip

    def _check_forward(self, record: PartitionState) -> None:
        """Refuse a partition's record that goes back: to an offset, or counts, below the
        record read before it (an older one written again)."""
        key = (record.topic, record.partition)
        held = self.partitions.get(key)
        if held is None or (
            record.next_offset >= held.next_offset
            and record.n_seen >= held.n_seen
            and record.n_mistakes >= held.n_mistakes
        ):
            return
        self.replayed_partitions.add(key)
        raise RecordFormatError(
            f"{record.topic}[{record.partition}] at offset {record.next_offset} with "
            f"{record.n_seen} examples, read after its record at {held.next_offset} with "
            f"{held.n_seen} (a partition's records only move forward: an older one written "
            "again)", "replayed",
        )  # fmt: skip

    def examples(self) -> int:
        """Examples learned cluster-wide, as the partition records count them."""
        return sum(p.n_seen for p in self.partitions.values())

    def _check_model(self, state: dict[str, Any]) -> None:
        model = model_of(state)
        if self.expected is not None and model != self.expected:
            raise RecordFormatError(
                f"a {model[0]}{model[1]}, not the group's {self.expected[0]}{self.expected[1]}",
                "mismatch",
            )

    def _check_mixture(self, mixture: Mixture) -> bool:
        """Whether ``mixture`` becomes the head (False: it is this view's head or a former one,
        read again)."""
        head = self.mixture
        if head is not None and mixture.version <= head.version:
            known = self.heads.get(mixture.version) == (mixture.worker, mixture.mixed_at)
            if known and mixture.version == head.version:
                # the head read again (written again after a stale one, by the leader): it is
                # again the log's last mixture record
                self.stale_after_head = False
                return False
            self.stale_after_head = True
            if known:  # the log is read once, in order: a former head again is a copy
                raise RecordFormatError(
                    f"mixture {mixture.version} of {mixture.worker!r}, a former head, read "
                    f"after the head {head.version} (an older record written again)",
                    "replayed",
                )  # fmt: skip
            raise RecordFormatError(
                f"mixture {mixture.version} of {mixture.worker!r} is not newer than the head "
                f"{head.version} (of {head.worker!r}, earlier in the log: a mixture written "
                "without it, by a second leader around a rebalance or a forged one; what only "
                "it held is mixed next)", "stale",
            )  # fmt: skip
        try:
            learner_of(mixture.state)
        except StreamPerceptronError as e:
            raise RecordFormatError(f"mixture {mixture.version}: {e}") from None
        self._check_model(mixture.state)
        n = mixture.state["n_seen"]
        if n > max(self.examples(), head.state["n_seen"] if head is not None else 0):
            raise RecordFormatError(
                f"mixture {mixture.version} holds {n} examples, the partitions count "
                f"{self.examples()}", "implausible",
            )  # fmt: skip
        if head is not None and (
            n < head.state["n_seen"]
            or any(mixture.included.get(w, 0) < q for w, q in head.included.items())
        ):
            raise RecordFormatError(
                f"mixture {mixture.version} holds less than the head {head.version} (mixtures "
                "only add examples and increments)", "implausible",
            )  # fmt: skip
        check_bound(Form.decode(as_delta(mixture.state)), mixture.state, n,
                     f"mixture {mixture.version}")  # fmt: skip
        if self.expected is None:
            self.expected = model_of(mixture.state)
        return True

    def _check_increment(self, record: Increment, worker: str, seq: int) -> Form:
        if (record.worker, record.seq) != (worker, seq):
            raise RecordFormatError("not the increment its key names")
        self._check_model(record.meta)
        try:
            step = Form.decode(record.delta)
        except MixError as e:
            raise RecordFormatError(str(e)) from None
        if record.examples > self.examples():
            raise RecordFormatError(
                f"{record.examples} examples, the partitions count {self.examples()}",
                "implausible",
            )
        check_bound(step, record.meta, record.examples, f"increment {seq} of {worker!r}")
        return step

    def steps(self, worker: str, after: int = 0) -> list[Increment]:
        """``worker``'s increments numbered above ``after``, in order, decoded and checked (one
        that fails is counted, dropped and left for the leader to delete)."""
        held = self.increments.get(worker, {})
        out = []
        for seq in sorted(q for q in held if q > after):
            value = held[seq]
            if isinstance(value, bytes):
                try:
                    record = decode(value)
                    if not isinstance(record, Increment):
                        raise RecordFormatError("not an increment")
                    self._check_increment(record, worker, seq)
                except RecordFormatError as e:
                    self.reject(e, increment_key(worker, seq))
                    self.doomed.add(increment_key(worker, seq))
                    del held[seq]
                    continue
                held[seq] = value = record
            out.append(value)
        return out

    # -- the model -----------------------------------------------------------------------------
    def counts(self, own: dict[PositionKey, list[int]] | None = None) -> tuple[int, int]:
        """Examples and mistakes learned cluster-wide: the partition records, with ``own``
        (this worker's live counts) in place of its partitions' records."""
        own = own or {}
        n = m = 0
        for key in self.partitions.keys() | own.keys():
            if key in own:
                n, m = n + own[key][0], m + own[key][1]
            else:
                p = self.partitions[key]
                n, m = n + p.n_seen, m + p.n_mistakes
        return n, m

    def included(self) -> dict[str, int]:
        """Per worker, the ``seq`` of its latest increment the newest mixture holds."""
        return dict(self.mixture.included) if self.mixture is not None else {}

    def fresh(self) -> dict[str, list[Increment]]:
        """Per worker, its increments the newest mixture does not hold, in order."""
        included = self.included()
        out = {}
        for worker in sorted(self.increments):
            new = self.steps(worker, included.get(worker, 0))
            if new:
                out[worker] = new
        return out

    def folded(
        self, start: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, list[Increment]], Form] | None:
        """The newest mixture with every increment it does not hold folded in (the next
        mixture), those increments, and the weights' change (the next mixture's step). Before
        any mixture, ``start`` (the fresh model: mixture 0) takes its place; ``None`` without
        it. A worker whose increments cannot be folded into it (its labels encoded otherwise)
        is left out: its increments are refused (``mismatch``) and doomed."""
        base = self.mixture.state if self.mixture is not None else start
        if base is None:
            return None
        fresh = self.fresh()
        for worker, steps in list(fresh.items()):
            try:
                fold(base, [(steps[-1].meta, [])])
            except MixError as e:
                for i in steps:
                    self.reject(RecordFormatError(str(e), "mismatch"), i.key)
                    self.doomed.add(i.key)
                    self.increments.get(worker, {}).pop(i.seq, None)
                del fresh[worker]
        forms = [[Form.decode(i.delta) for i in steps] for steps in fresh.values()]
        lags = {v: self.lag(v) for v in {i.base_version for s in fresh.values() for i in s}}
        state = fold(
            base, [(steps[-1].meta, f) for steps, f in zip(fresh.values(), forms)],
            workers=self.group_size(),
            lags=[[lags[i.base_version] for i in steps] for steps in fresh.values()],
        )  # fmt: skip
        return state, fresh, fold_step(forms, share_of(self.group_size(), len(forms)))

    def group_size(self) -> int:
        """The live group's size: the workers named by the partition records (each partition's
        latest committer)."""
        return len({p.worker for p in self.partitions.values() if p.worker})

    def current(self) -> tuple[dict[str, Any], int] | None:
        """The cluster's current model and its version: the newest mixture with every
        increment it does not hold folded in (version + 1 then), with the exact cluster-wide
        count of mistakes. Its ``n_seen`` is what it learned: less than :meth:`counts` says
        when learned examples are missing from it (the caller decides: ``pull-model`` exits 1
        unless ``--allow-incomplete``)."""
        folded = self.folded()
        if folded is None or self.mixture is None:
            return None
        state, fresh, _ = folded
        # at most its n_seen: a model missing learned examples (pulled with
        # --allow-incomplete) must still load, and a state's n_mistakes <= n_seen
        state["n_mistakes"] = min(self.counts()[1], state["n_seen"])
        return state, self.mixture.version + (1 if fresh else 0)

