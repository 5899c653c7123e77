"""Command line: ``stream-perceptron run | inspect | pull-model | example-data``.

Exit codes: 0 done, 1 failure, 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import logging
import signal
import sys
import threading
import urllib.parse
from collections.abc import Callable

from stream_perceptron import __version__
from stream_perceptron.formats import FORMATS

__all__ = ["main", "build_parser"]

logger = logging.getLogger(__name__)

EPILOG_RUN = """examples:
  cat data.csv | stream-perceptron run --format csv --label y
  stream-perceptron run --input data.jsonl --format jsonl --model multiclass \\
      --checkpoint model.json --checkpoint-every 10000 --resume --dead-letter bad.jsonl
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _int_in(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {low} to {high}")
        return value

    return parse


def _float_upto(high: float) -> Callable[[str], float]:
    """An argument type: a positive finite number of at most ``high``."""

    def parse(text: str) -> float:
        value = _positive_float(text)
        if not value <= high:  # also refuses inf and nan
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {high:g}")
        return value

    return parse


def _http_url(text: str) -> str:
    """A Pushgateway address: ``http(s)://host[:port][/path]`` or ``host:port``."""
    url = text if "://" in text else f"http://{text}"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL: {e}") from None
    spaced = any(c.isspace() for c in text)
    if parts.scheme not in ("http", "https") or not parts.hostname or spaced:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL of a host")
    return text


def _half_life(text: str) -> float:
    """``--average-half-life``: the learner's own rule (``check_half_life``), up to 1e12."""
    from stream_perceptron.learners._linear import check_half_life

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    problem = check_half_life(value)
    if problem is None and not value <= 1e12:
        problem = "must be at most 1e+12"
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return value


def _text(text: str) -> str:
    """A name that reaches an exporter (a topic, group or run name as a label): text that can be
    written as UTF-8 (not bytes of another encoding, which argv holds as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{text!a} is not UTF-8 text") from None
    return text


def _listen_host(text: str) -> str:
    """``--metrics-host``: an address or name to bind; never empty (which binds every interface
    unasked): every interface is ``0.0.0.0`` or ``::``, said so."""
    if not text or any(c.isspace() for c in text) or text.startswith("["):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host: give an address such as 127.0.0.1, or 0.0.0.0 for every "
            "interface"
        )
    return text


MAX_SECONDS = 1e6  # about 11 days: longer waits are not what anybody means (and overflow timers)


def _logging_options() -> argparse.ArgumentParser:
    """-v/-q, accepted before or after the command (``default=SUPPRESS`` keeps the first)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more log output"
    )
    common.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="errors only"
    )
    return common


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        parents=[_logging_options()],
        help="learn from a stream of records (stdin by default)",
        description="Learn one pass over a stream, prequentially: each labelled record is "
        "predicted, then learned from; unlabelled records are only predicted.",
        epilog=EPILOG_RUN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = run.add_argument_group("input")
    src.add_argument(
        "--source", choices=("stdin", "kafka"), default="stdin", help="where records come from"
    )
    src.add_argument("--input", default="-", metavar="PATH|-", help="input file (default: stdin)")
    src.add_argument(
        "--format",
        choices=FORMATS,
        help="record format (default: from the --input file's extension)",
    )
    src.add_argument("--label", default="y", metavar="FIELD", help="label field (default: y)")
    src.add_argument(
        "--max-line-bytes",
        type=_int_in(1, 1 << 30),
        default=1 << 20,
        metavar="N",
        help="longer lines are bad records (default: 1 MiB; at most 1 GiB)",
    )
    kafka = run.add_argument_group(
        "kafka (--source kafka; SASL credentials come from the environment variables "
        "STREAM_PERCEPTRON_KAFKA_USERNAME and STREAM_PERCEPTRON_KAFKA_PASSWORD)"
    )
    kafka.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]", help="Kafka brokers")
    kafka.add_argument(
        "--topic",
        action="append",
        type=_text,
        default=[],
        metavar="TOPIC",
        help="topic to consume (repeat)",
    )
    kafka.add_argument("--group", type=_text, metavar="GROUP", help="consumer group id")
    _add_client_flag(kafka, "; --kafka-option and --producer-option use its own names")
    kafka.add_argument(
        "--exit-at-end",
        action="store_true",
        help="stop (checkpoint and commit) once the end offsets seen at assignment are reached "
        "(shared-model mode: the mixing leader stays while the other workers still commit)",
    )
    kafka.add_argument(
        "--predictions-topic", type=_text, metavar="TOPIC", help="produce predictions here"
    )
    kafka.add_argument(
        "--dead-letter-topic", type=_text, metavar="TOPIC", help="produce bad records here"
    )
    _add_security_flags(kafka)
    kafka.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a consumer setting in the client's own naming, e.g. session_timeout_ms=10000 "
        "(kafka-python) or session.timeout.ms=10000 (confluent-kafka) (repeat)",
    )
    kafka.add_argument(
        "--producer-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a producer setting for the predictions and dead-letter topics in the client's own "
        "naming, e.g. linger_ms=20, batch_size=262144, compression_type=lz4, acks=1 "
        "(kafka-python) or linger.ms=20, compression.type=lz4 (confluent-kafka) (repeat; "
        "default acks=all, linger 5 ms)",
    )
    kafka.add_argument(
        "--instance-id",
        type=_text,
        metavar="ID",
        help="static group membership (group.instance.id): a worker restarted with the same ID "
        "takes its partitions back without a rebalance (deploy/k8s passes the pod name)",
    )
    shared = run.add_argument_group(
        "shared-model mode (--source kafka: every worker of --group learns one model; "
        "outputs, partition state and offsets are committed in Kafka transactions)"
    )
    shared.add_argument(
        "--model-topic",
        type=_text,
        metavar="TOPIC",
        help="the compacted topic holding the shared model (created if missing; an existing "
        "one must have one partition and cleanup.policy=compact); turns the mode on. Commits "
        "follow --checkpoint-every/--checkpoint-interval (default every 1 s)",
    )
    shared.add_argument(
        "--adopt-model-settings",
        action="store_true",
        help="when the model topic's model has other hyperparameters (--lr, --bias, "
        "--averaged, ...) than this worker's flags, take the topic's (default: exit 2 naming "
        "them)",
    )
    shared.add_argument(
        "--mix-every",
        type=_positive_int,
        metavar="N",
        help="mix as soon as the group learned N examples that no mixture holds (the owner of "
        "partition 0 of the first topic mixes; every worker then moves onto the mixture); "
        "every worker commits after its part of N records for it (N times its share of the "
        "input partitions)",
    )
    shared.add_argument(
        "--mix-interval",
        type=_float_upto(MAX_SECONDS),
        metavar="SECONDS",
        help="mix every SECONDS (default 5 when --mix-every is not given)",
    )
    shared.add_argument(
        "--model-topic-key-file",
        metavar="PATH",
        help="the group's secret key (32 bytes or more; every worker and pull-model the same): "
        "each model-topic record is signed with it (HMAC-SHA256 in a header) and a record "
        "without its signature is refused, even where the topic's ACLs are loose",
    )
    model = run.add_argument_group("model")
    model.add_argument(
        "--model",
        choices=("binary", "multiclass", "centroid", "pa", "pa-multiclass"),
        default="binary",
        help="learner: the perceptron (binary, multiclass), the nearest class mean (centroid), "
        "passive-aggressive (pa: binary, pa-multiclass; see --pa-variant and --C)",
    )
    model.add_argument(
        "--lr",
        type=_float_upto(1e6),
        default=1.0,
        help="learning rate (default 1). With --init zeros and --bias learned or none it only "
        "scales every weight and bias, so the predictions stay the same (a power of two: to "
        "the bit; other values: up to floating-point tie-breaking). It matters with --bias r2 "
        "(the bias step R^2 does not scale with it) and --init random (the initial weights "
        "do not)",
    )
    model.add_argument(
        "--bias",
        choices=("learned", "r2", "none"),
        default="learned",
        help="learned: b moves by lr on a mistake; r2: by R^2, R the largest input norm so far "
        "(Novikoff's bound, then --lr matters); none: no bias",
    )
    model.add_argument(
        "--init",
        choices=("zeros", "random"),
        default="zeros",
        help="initial weights: zeros, or random small normal values (seeded by --seed; then "
        "--lr sets the step against their scale)",
    )
    model.add_argument(
        "--seed", type=_int_in(0, 2**32 - 1), default=None, help="seed for --init random"
    )
    model.add_argument("--averaged", action="store_true", help="averaged perceptron")
    model.add_argument(
        "--average-half-life",
        type=_half_life,
        default=None,
        metavar="N",
        help="with --averaged: an average that forgets, a <- (1-alpha)*a + alpha*w after each "
        "example, alpha = 1 - 2^(-1/N): an example's weights count half after N more examples. "
        "For drifting streams (e.g. N = 700, alpha 0.001); without it the average remembers "
        "everything",
    )
    model.add_argument(
        "--pa-variant",
        dest="variant",
        choices=("pa", "pa1", "pa2"),
        default="pa1",
        help="--model pa: PA (step loss/||x||^2), PA-I (at most C), PA-II (loss/(||x||^2 + "
        "1/(2C))); default pa1, River's PAClassifier default",
    )
    model.add_argument(
        "--C",
        dest="C",
        type=_float_upto(1e6),
        default=1.0,
        help="--model pa: aggressiveness of PA-I and PA-II (default 1; smaller is more "
        "cautious, e.g. 0.01 on noisy or drifting streams)",
    )
    model.add_argument(
        "--scale",
        choices=("standard",),
        default=None,
        help="standardise each feature online, (v - running mean) / running std, the example "
        "counted first (River's StandardScaler); saved in the checkpoint. Use it with --bias "
        "learned (it hurt --bias none and --bias r2 with --averaged in our measurements)",
    )
    model.add_argument(
        "--hash-bits",
        type=_int_in(1, 32),
        default=None,
        metavar="B",
        help="hash feature names to 2^B buckets (MurmurHash3, Vowpal Wabbit's -b): memory "
        "bounded by B whatever the vocabulary; colliding features add up",
    )
    model.add_argument(
        "--rff-components",
        type=_int_in(1, 1 << 16),
        default=None,
        metavar="D",
        help="map the (hashed, scaled) input to D random Fourier features, "
        "sqrt(2/D) cos(Wx + b), W ~ N(0, 2G) seeded by --seed (default 0): an RBF kernel's "
        "map, so the perceptron learns curved boundaries in one pass. Cost and memory grow "
        "with D (D floats per input feature). On River's Bananas (2 features) --averaged "
        "--scale standard --rff-components 100 --rff-gamma 2 reaches 89%% (linear: 58%%)",
    )
    model.add_argument(
        "--rff-gamma",
        type=_float_upto(1e6),
        default=1.0,
        metavar="G",
        help="with --rff-components: the kernel width G of exp(-G ||x - x'||^2) (default 1). "
        "Larger is a more local boundary; with --scale standard and a few features, 0.5 to 4",
    )
    drift = run.add_argument_group("drift")
    drift.add_argument(
        "--drift-detector",
        choices=("adwin", "none"),
        default="adwin",
        help="watch the stream of mistakes for a rise of the error rate: adwin (ADWIN as River "
        "computes it, delta 0.002, on the mistake rate of chunks of 8 examples, checked every "
        "256 examples; a switch from 10%% to 30%% errors is seen after about 500 examples). "
        "Counted in stream_perceptron_drifts_total, the summary and the checkpoint; it costs "
        "about 0.01 us an example, under 2%% of the fastest runs. none: no detection "
        "(default adwin)",
    )
    drift.add_argument(
        "--on-drift",
        choices=("none", "reset", "forget"),
        default="none",
        help="with --drift-detector: what a drift does to the model: none (reported only), "
        "reset (a new model, the same flags, from the next example) or forget (--averaged: "
        "restart the average from the current weights, keeping them and the scaling "
        "statistics). With reset or forget the engine learns record by record, so the action "
        "lands on the same example in every run and resume",
    )
    out = run.add_argument_group("output")
    out.add_argument("--predictions", metavar="PATH|-", help="one JSON line per record")
    out.add_argument("--dead-letter", metavar="PATH", help="one JSON line per bad record")
    out.add_argument("--summary-json", metavar="PATH", help="write the final summary as JSON")
    out.add_argument(
        "--on-error",
        choices=("skip", "fail"),
        default="skip",
        help="skip (count and dead-letter) bad records, or stop at the first (default: skip)",
    )
    out.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress line on stderr (default: when stderr is a terminal)",
    )
    metrics = run.add_argument_group("metrics (Prometheus) and the live page")
    metrics.add_argument(
        "--ui",
        action="store_true",
        help="serve a live page of the model learning at / on the metrics server (any free "
        "port unless --metrics-port) and print its address; it stays up after the stream ends",
    )
    metrics.add_argument(
        "--ui-linger",
        type=_float_upto(MAX_SECONDS),
        metavar="SECONDS",
        help="with --ui: how long the page stays up after the stream ended (default: until "
        "Ctrl-C)",
    )
    metrics.add_argument(
        "--metrics-port",
        type=_int_in(-1, 65535),
        metavar="PORT",
        help="serve /metrics, the live page (/) and its data (/api/state) on PORT (0: any free "
        "port; -1: off). Off by default for stdin, 9108 with --source kafka",
    )
    metrics.add_argument(
        "--metrics-host",
        type=_listen_host,
        default="127.0.0.1",
        metavar="HOST",
        help="address (default 127.0.0.1; 0.0.0.0 for every interface). Bound to a loopback "
        "address, requests naming another Host are refused (DNS rebinding)",
    )
    metrics.add_argument(
        "--pushgateway", type=_http_url, metavar="URL", help="push metrics to a Pushgateway"
    )
    metrics.add_argument(
        "--push-interval",
        type=_float_upto(MAX_SECONDS),
        default=10.0,
        metavar="SECONDS",
        help="seconds between pushes (default 10; one more push at the end)",
    )
    metrics.add_argument(
        "--run-name",
        type=_text,
        metavar="NAME",
        help="Pushgateway grouping label 'run' (default: host-pid)",
    )
    metrics.add_argument(
        "--metrics-max-weights",
        type=_int_in(1, 100_000),
        default=50,
        metavar="K",
        help="weight series exposed: the K largest in absolute value (default 50)",
    )
    metrics.add_argument(
        "--rolling-window",
        type=_int_in(1, 10_000_000),
        default=1000,
        metavar="N",
        help="examples in the rolling accuracy and margin window (default 1000)",
    )
    ck = run.add_argument_group("checkpoints")
    ck.add_argument("--checkpoint", metavar="PATH", help="save model and position here")
    ck.add_argument("--checkpoint-every", type=_positive_int, metavar="N", help="every N records")
    ck.add_argument(
        "--checkpoint-interval",
        type=_float_upto(MAX_SECONDS),
        metavar="SECONDS",
        help="every T seconds",
    )
    ck.add_argument(
        "--resume",
        action="store_true",
        help="continue from --checkpoint if it exists (a file --input skips what was learned)",
    )
    ck.add_argument(
        "--input-changed",
        choices=("stop", "restart"),
        default="stop",
        help="--resume when the --input file is not what the checkpoint read (shorter, or other "
        "first bytes: rotated or rewritten): stop with exit 2 (default), or restart: learn it "
        "from its first line with the checkpoint's model",
    )
    ck.add_argument(
        "--fresh",
        action="store_true",
        help="start a new model although --checkpoint exists (it is overwritten at the first "
        "save; with --source kafka, reading goes on from the group's committed offsets)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-perceptron",
        description="A streaming perceptron: learns from records on stdin or Kafka.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    inspect = sub.add_parser(
        "inspect", help="show a checkpoint's model", parents=[_logging_options()]
    )
    inspect.add_argument("checkpoint", metavar="CHECKPOINT")
    inspect.add_argument("--top", type=_positive_int, default=10, help="largest weights to show")
    pull = sub.add_parser(
        "pull-model",
        parents=[_logging_options()],
        help="write a shared model's current mixture as a checkpoint",
        description="Read a shared-model topic to its end and write the cluster's current "
        "mixed model as a checkpoint JSON (for inspect, StreamClassifier.from_state, or "
        "--checkpoint PATH --resume).",
    )
    pull.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]")
    pull.add_argument("--model-topic", type=_text, required=True, metavar="TOPIC")
    _add_client_flag(pull)
    pull.add_argument(
        "--output",
        required=True,
        metavar="PATH",
        help="checkpoint file to write (a regular file; an existing one only with --force)",
    )
    pull.add_argument("--force", action="store_true", help="replace an existing --output file")
    pull.add_argument(
        "--model-topic-key-file",
        metavar="PATH",
        help="the group's key: only records signed with it count (as the workers' flag)",
    )
    _add_security_flags(pull)
    data = sub.add_parser(
        "example-data", help="write a bundled data set to stdout", parents=[_logging_options()]
    )
    data.add_argument("name", choices=("phishing", "image-segments", "bananas"))
    data.add_argument("--format", choices=FORMATS, default="csv")
    data.add_argument("--label", default="y")
    return parser


def _add_client_flag(group: argparse._ActionsContainer, more: str = "") -> None:
    """``--kafka-client`` of every command that talks to Kafka."""
    group.add_argument(
        "--kafka-client",
        choices=("auto", "confluent-kafka", "kafka-python"),
        default="auto",
        help="the Kafka client library (default auto: confluent-kafka, librdkafka from the extra "
        "stream-perceptron[rdkafka], about 5x faster, where it is installed, else kafka-python "
        "with a notice)" + more,
    )


def _add_security_flags(group: argparse._ActionsContainer) -> None:
    """The security flags of every command that talks to Kafka (``run``, ``pull-model``)."""
    group.add_argument(
        "--security-protocol",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        help="how the client talks to the brokers (default PLAINTEXT)",
    )
    group.add_argument(
        "--sasl-mechanism",
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        help="with SASL_*: the user name and password come from the environment, "
        "STREAM_PERCEPTRON_KAFKA_USERNAME and STREAM_PERCEPTRON_KAFKA_PASSWORD (never flags)",
    )
    group.add_argument(
        "--ssl-cafile", metavar="PATH", help="the CA certificate (PEM) of the brokers"
    )
    group.add_argument(
        "--ssl-certfile", metavar="PATH", help="client certificate (PEM), for mutual TLS"
    )
    group.add_argument("--ssl-keyfile", metavar="PATH", help="its private key (PEM)")


def _configure_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    if not verbose and not quiet:
        level = logging.WARNING
    logging.basicConfig(
        level=level, format="stream-perceptron: %(levelname)s: %(message)s", stream=sys.stderr
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose, args.quiet)
    if hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread():
        # `kill -USR1 PID`: every thread's stack on stderr (a worker that seems stuck)
        with contextlib.suppress(io.UnsupportedOperation, OSError, ValueError):
            faulthandler.register(signal.SIGUSR1, all_threads=True)  # stderr without a fd: not
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "run":
        from stream_perceptron.allocator import tune_malloc
        from stream_perceptron.cli.run import run_command

        tune_malloc()
        return run_command(args, parser)
    if args.command == "inspect":
        from stream_perceptron.cli.inspect import inspect_command

        return inspect_command(args)
    if args.command == "pull-model":
        from stream_perceptron.cli.kafka import pull_model_command

        return pull_model_command(args)
    from stream_perceptron.example_data import write_dataset

    try:
        write_dataset(args.name, args.format, sys.stdout, args.label)
    except BrokenPipeError:
        return 0
    return 0
