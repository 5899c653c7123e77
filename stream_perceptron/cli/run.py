"""``stream-perceptron run``: build the engine from command-line options and run it."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from connectors import ConnectorError, FileSink, PartitionedSource, Source, open_line_source
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.checkpoint.coordinator import InputChangedError
from stream_perceptron.checkpoint.lock import CheckpointLock, CheckpointLockedError
from stream_perceptron.checkpoint.store import Checkpoint
from stream_perceptron.cli.flags import Millis
from stream_perceptron.cli.learner_flags import LearnerFlags, make_learner, warn_ignored_flags
from stream_perceptron.cli.run_checks import checked_run_args
from stream_perceptron.drift import DriftMonitor
from stream_perceptron.engine import Engine, EngineError, Outputs
from stream_perceptron.engine.drift_actions import forget_average, reset_learner
from stream_perceptron.engine.drift_reference import ReferenceWatch, reference_monitor
from stream_perceptron.errors import StreamPerceptronError, UsageError
from stream_perceptron.formats import make_parser
from stream_perceptron.join import PendingJoin
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.learners.preprocessed import base_learner
from stream_perceptron.paths import is_regular_or_absent
from stream_perceptron.progress import Progress
from stream_perceptron.state import write_json
from stream_perceptron.stats import RunStats

if TYPE_CHECKING:  # imported when used: a run without metrics (or signing) starts without them
    from stream_perceptron.metrics import MetricsExporter

__all__ = ["run_command"]

logger = logging.getLogger(__name__)

def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    fmt = checked_run_args(args, parser)
    _warn_without_c()
    try:
        return _run(args, fmt)
    except (StreamPerceptronError, ConnectorError, OSError) as e:
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return _exit_code(e)
    finally:
        while _stopping:  # stopped in time
            _stopping.pop().cancel()


def _warn_without_c() -> None:
    """One line when a C extension is not in use: a run 20-60x slower looks like a working one."""
    from stream_perceptron.native import missing

    off = missing()
    if not off:
        return
    reasons = sorted(set(off.values()))
    built = all(reason.startswith("turned off") for reason in reasons)
    logger.warning(
        "no C tier for %s (%s): their work runs in pure Python, 20-60x slower%s",
        ", ".join(off), "; ".join(reasons),
        "" if built else "; reinstall stream-perceptron where a C compiler is found",
    )  # fmt: skip


def _run(args: argparse.Namespace, fmt: str) -> int:
    """The run, holding the checkpoint's lock from before anything is read or cut back to the
    end; a checkpoint in use, or an input that changed behind its name, exits 2."""
    lock = None
    try:
        if args.checkpoint:
            lock = CheckpointLock(args.checkpoint).acquire()
        return _learn(args, fmt)
    except (CheckpointLockedError, InputChangedError) as e:  # the user must choose
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return e.exit_code
    finally:
        if lock is not None:
            lock.release()


def _learn(args: argparse.Namespace, fmt: str) -> int:
    stats = RunStats(rolling_window=args.rolling_window)
    if args.drift_detector == "adwin":
        stats.drift = DriftMonitor()
    elif args.drift_detector == "reference":
        stats.drift = reference_monitor()
    flags = LearnerFlags.from_args(args)
    learner = make_learner(flags)
    kafka = args.source == "kafka"
    every, interval = args.checkpoint_every, args.checkpoint_interval
    checkpoint = None
    if args.resume:
        source_name = None if kafka else ("stdin" if args.input == "-" else args.input)
        coordinator, checkpoint = CheckpointCoordinator.resume(
            args.checkpoint,
            source=source_name,
            every=every,
            interval=interval,
            restart_changed=args.input_changed == "restart",
        )
    else:
        coordinator = CheckpointCoordinator(args.checkpoint, every=every, interval=interval)
    if not kafka and args.input != "-":
        coordinator.inputs[args.input] = args.input  # identified in each checkpoint
    if checkpoint is not None:
        warn_ignored_flags(flags, checkpoint.model)
        learner = checkpoint.model
        if args.on_drift == "forget" and not _averaged(learner):  # as a fresh run: exit 2
            raise UsageError(
                f"--on-drift forget restarts the average: the checkpoint's model "
                f"({type(base_learner(learner)).__name__}) is not averaged; give --on-drift "
                "reset or none"
            )
    if stats.drift is not None and args.drift_detector == "reference":
        stats.drift_reference = ReferenceWatch(learner, stats.drift, args.drift_reference_after)
    if checkpoint is not None and checkpoint.stats:
        stats.load_state(checkpoint.stats)
    join = _pending_join(args, checkpoint)

    # Regular files (or new ones): their sizes go in the checkpoint, and a resume cuts them back
    # to those. Pipes, FIFOs and stdout are streamed to, never cut.
    paths = {
        name: path
        for name, path in (("predictions", args.predictions), ("dead_letters", args.dead_letter))
        if path and path != "-" and is_regular_or_absent(path)
    }
    if args.resume:
        CheckpointCoordinator.cut_outputs(list(paths.values()), checkpoint)
    outputs = Outputs(
        predictions=FileSink(args.predictions) if args.predictions else None,
        dead_letters=FileSink(args.dead_letter) if args.dead_letter else None,
        paths=paths,
    )
    shared = None
    join_tasks = None
    if kafka:
        from stream_perceptron.cli import kafka as kafka_options

        if args.model_topic:
            shared, outputs = kafka_options.shared_model(args, outputs)
            coordinator = shared
            if join is not None:  # a store per partition task, in Kafka
                join, join_tasks = None, kafka_options.shared_join(args, shared)
        else:
            outputs = kafka_options.kafka_outputs(args, outputs)
    show_progress = sys.stderr.isatty() if args.progress is None else args.progress
    progress = Progress(sys.stderr) if show_progress else None
    metrics_on = args.metrics_port is not None or bool(args.pushgateway)
    batch_hooks: list[Callable[[float], None]] = []
    if progress is not None:
        batch_hooks.append(lambda _seconds: progress.update(stats))
    engine = Engine(
        learner,
        make_parser(fmt, args.label, args.join_key),
        outputs,
        coordinator=coordinator,
        on_error=args.on_error,
        stats=stats,
        on_batch=lambda seconds: _call_all(batch_hooks, seconds),
        keep_recent=args.rolling_window if metrics_on else 0,
        # a reset on drift lands after the example that revealed it, which a block learned
        # whole would pass. A join on Kafka stays on the record path: its merge by timestamp
        # interleaves six partitions, so the block path sees runs of one or two records and
        # measured slower (196k records: 3.3-3.6 s of CPU against 2.6 s). Its kill -9 failures
        # were the test's records deleted by the broker's retention (session 24), not the path.
        dense=args.on_drift == "none" and not (kafka and args.join_key is not None),
        join=join,
        join_tasks=join_tasks,
    )
    if stats.drift is not None and args.on_drift != "none":
        action = reset_learner if args.on_drift == "reset" else forget_average
        stats.drift.on_drift = lambda _position: action(engine.learner)
    source: Source | None = None
    if kafka:
        source = kafka_options.kafka_source(args, engine)
    exporter = _start_metrics(args, engine, source) if metrics_on else None
    if exporter is not None and shared is not None:
        from stream_perceptron.metrics.shared_model import SharedModelCollector

        exporter.registry.register(SharedModelCollector(shared, engine.lock))
    if shared is not None:
        timeline = shared.timeline
        batch_hooks.append(lambda seconds: timeline.add("learn", seconds))
    if exporter is not None:
        batch_hooks.append(exporter.observe_batch)

    signalled: list[int] = []  # a stop asked for ends the process: no --ui linger after it

    def stop(signum: int, _frame: Any) -> None:
        logger.warning(
            "%s received: stopping after the current record", signal.Signals(signum).name
        )
        signalled.append(signum)
        engine.request_stop()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    unwatch = _watch_stop_signals() if kafka else None
    failure: Exception | None = None
    try:
        if source is None:
            source = open_line_source(args.input, max_line_bytes=args.max_line_bytes)
        if shared is not None:
            shared.start()
        with source:
            engine.run(source)
    except EngineError as e:
        failure = e
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if unwatch is not None:
            unwatch()
        if progress:
            progress.finish(stats)
        outputs.close()
        if shared is not None:
            shared.close()
        if exporter is not None:
            exporter.live.ended = True
            if failure is None and not args.ui:
                _close_metrics(exporter, args)
    try:
        summary = {
            **stats.summary(), "model": type(learner).__name__, "updates": learner.n_mistakes
        }
        if failure is not None:
            summary["error"] = str(failure)
        if shared is not None:  # where a shared-model worker's time went
            summary["timeline"] = shared.timeline.summary()
        if args.summary_json:
            write_json(args.summary_json, summary)
        if not args.quiet:
            print(stats.format_human(), file=sys.stderr)
        if args.ui and exporter is not None and not signalled:
            _linger(args.ui_linger)
    finally:
        if exporter is not None and (failure is not None or args.ui):
            _close_metrics(exporter, args)
    if failure is not None:
        print(f"stream-perceptron: error: {failure}", file=sys.stderr)
        return _exit_code(failure)
    return 0


#: Kafka mode: how long a stop may take after SIGTERM/SIGINT (10 s, plus one transaction
#: timeout for a commit caught by a broker outage): the process has ended by then
STOP_BOUND_S = 20.0
#: Of that bound, what the watchdog leaves for its own exit (the stacks written, the log
#: flushed, the exit, a loaded machine's scheduling): it fires STOP_BOUND_S - EXIT_ALLOWANCE_S
#: after the signal. A fresh clone's suite beside a soak (load about 12) once took over 1 s.
EXIT_ALLOWANCE_S = 2.0
_stopping: list[threading.Timer] = []


def _watch_stop_signals() -> Callable[[], None]:
    """Start the stop bound from a helper thread as soon as SIGTERM or SIGINT arrives, even
    while the main thread, which runs Python's signal handlers, waits inside a client's C
    call (signal.set_wakeup_fd: the signal's number is written to a pipe the helper reads).
    Returns the function that undoes it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    stops = {int(signal.SIGTERM): "SIGTERM", int(signal.SIGINT): "SIGINT"}

    def watch() -> None:
        while data := os.read(read_end, 64):
            names = [stops[n] for n in data if n in stops]
            if names:
                _exit_if_still_running(STOP_BOUND_S - EXIT_ALLOWANCE_S, names[0])
        os.close(read_end)

    threading.Thread(target=watch, name="stop-signals", daemon=True).start()

    def unwatch() -> None:
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the helper reads the end of the pipe and stops

    return unwatch


def _exit_if_still_running(seconds: float, signal_name: str) -> None:
    """Exit 1 if the process still runs ``seconds`` from now (once per run). Nothing is lost:
    what was not committed is aborted by the broker (an open transaction times out, a
    restarted worker fences it) or was never in a checkpoint, and is read again."""
    if _stopping:
        return

    def give_up() -> None:
        logger.critical(
            "still stopping %g s after %s (a broker unreachable, or a client that cannot "
            "recover): exiting now; what was not committed is read again after a restart",
            seconds, signal_name,
        )  # fmt: skip
        with contextlib.suppress(io.UnsupportedOperation, OSError, ValueError):
            faulthandler.dump_traceback(all_threads=True)  # where it was stuck, for the log
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(1)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    _stopping.append(timer)


def _exit_code(error: Exception) -> int:
    """2 for what the user must change (flags against the model topic's model, a model topic
    that is not one partition compacted), 1 for the rest."""
    from connectors.kafka.model_log import ModelTopicError

    return 2 if isinstance(error, ModelTopicError) else getattr(error, "exit_code", 1)


def _close_metrics(exporter: MetricsExporter, args: argparse.Namespace) -> None:
    if not exporter.close():
        logger.error("the final push to %s failed", args.pushgateway)


def _linger(seconds: float | None) -> None:
    """--ui: keep the live page up after the stream ended (until Ctrl-C without a limit)."""
    print(
        "stream-perceptron: the stream ended; the live page stays up "
        + ("until Ctrl-C" if seconds is None else f"for {seconds:g} s"),
        file=sys.stderr,
        flush=True,
    )
    try:
        threading.Event().wait(seconds)
    except KeyboardInterrupt:
        pass


def _pending_join(args: argparse.Namespace, checkpoint: Checkpoint | None) -> PendingJoin | None:
    """--join-key's pending store, holding what the resumed checkpoint left waiting."""
    saved = None if checkpoint is None else checkpoint.join
    if args.join_key is None:
        if saved is not None:  # dropping them would lose their outcomes: the user chooses
            raise UsageError(
                "the checkpoint holds events and outcomes waiting for each other (it was run "
                "with --join-key): give --join-key FIELD, or --fresh to start a new model"
            )
        return None
    by_time = isinstance(args.label_wait, Millis)  # a duration: the records' time
    join = PendingJoin(args.max_pending, args.label_wait, by_time=by_time)
    if saved is not None:
        join.load_state(saved)
    return join


def _averaged(learner: StreamClassifier) -> bool:
    """Whether ``learner`` keeps an average (what ``--on-drift forget`` restarts)."""
    return bool(base_learner(learner)._get_params().get("averaged"))


def _call_all(hooks: list[Callable[[float], None]], seconds: float) -> None:
    for hook in hooks:
        hook(seconds)


def _start_metrics(
    args: argparse.Namespace, engine: Engine, source: Source | None
) -> MetricsExporter:
    from stream_perceptron.metrics import MetricsExporter
    from stream_perceptron.sharing.coordinator import SharedModelCoordinator

    kafka_state = None
    if isinstance(source, PartitionedSource):

        def kafka_state() -> dict[str, Any]:
            coordinator = engine.coordinator
            # shared-model mode commits offsets in its transactions, not through the source
            if isinstance(coordinator, SharedModelCoordinator):
                committed = dict(coordinator.committed)
            else:
                committed = source.committed_offsets()
            return {
                "lag": source.lag(),
                "committed": committed,
                "rebalances": source.rebalances,
            }

    topics = [*args.topic, args.labels_topic] if args.labels_topic else args.topic
    describe = {
        "source": f"kafka {','.join(topics)}" if args.source == "kafka" else (
            "stdin" if args.input == "-" else args.input
        ),
        "format": args.format or "from the file name",
    }
    exporter = MetricsExporter(
        engine, max_weights=args.metrics_max_weights, kafka=kafka_state, describe=describe
    )
    if args.metrics_port is not None:
        port = exporter.serve(args.metrics_port, args.metrics_host)
        host = f"[{args.metrics_host}]" if ":" in args.metrics_host else args.metrics_host
        if args.ui:  # printed even with -q: it is what --ui is for
            print(f"stream-perceptron: live page on http://{host}:{port}/", file=sys.stderr,
                  flush=True)  # fmt: skip
        if not args.quiet:
            print(
                f"stream-perceptron: metrics on http://{host}:{port}/metrics",
                file=sys.stderr,
                flush=True,
            )
    if args.pushgateway:
        import socket

        run_name = args.run_name or f"{socket.gethostname()}-{os.getpid()}"
        exporter.start_pushing(
            args.pushgateway,
            args.push_interval,
            {"instance": socket.gethostname(), "run": run_name},
        )
    return exporter
