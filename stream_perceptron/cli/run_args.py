"""The flags of ``stream-perceptron run``, by group: input, Kafka, shared model, model, drift,
output, metrics, checkpoints."""

from __future__ import annotations

import argparse

from stream_perceptron.cli.flags import (
    MAX_SECONDS,
    add_client_flag,
    add_security_flags,
    float_upto,
    half_life,
    http_url,
    int_in,
    listen_host,
    logging_options,
    positive_int,
    records_or_duration,
    text,
)
from stream_perceptron.drift import DETECTORS, REFERENCE_AFTER
from stream_perceptron.formats import FORMATS

__all__ = ["add_run"]


EPILOG_RUN = """examples:
  cat data.csv | stream-perceptron run --format csv --label y
  stream-perceptron run --input data.jsonl --format jsonl --model multiclass \\
      --checkpoint model.json --checkpoint-every 10000 --resume --dead-letter bad.jsonl
"""


def add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        parents=[logging_options()],
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
        type=int_in(1, 1 << 30),
        default=1 << 20,
        metavar="N",
        help="longer lines are bad records (default: 1 MiB; at most 1 GiB)",
    )
    join = run.add_argument_group("labels that come later (--join-key; csv and jsonl)")
    join.add_argument(
        "--join-key",
        metavar="FIELD",
        help="join each event (a record with FIELD and features, no label: predicted at once, "
        "its features kept) to its outcome (FIELD and a label, no features: the model learns "
        "the event's features with it); an outcome that comes first waits for its event. "
        "FIELD is not a feature; its value is a string or an integer. JSON lines are joined "
        "a block at a time (the block path, the same results as record by record) unless a "
        "block holds a backslash, a nested object, a numeric key or a bad record, or with "
        "--on-error fail, --on-drift or --drift-detector reference; CSV, and a join on "
        "Kafka, go record by record",
    )
    join.add_argument(
        "--max-pending",
        type=positive_int,
        default=None,  # DEFAULT_MAX_PENDING, set once checked
        metavar="N",
        help="at most N events and outcomes wait; past it the oldest go (counted expired or "
        "unmatched, kept in --dead-letter) (default 100,000; about 25 bytes a feature value "
        "waiting)",
    )
    join.add_argument(
        "--label-wait",
        type=records_or_duration,
        default=None,  # DEFAULT_LABEL_WAIT, set once checked
        metavar="N|DURATION",
        help="an event waits for its outcome, and an outcome for its event, at most N records "
        "(default 1,000,000), or a DURATION of the records' time (90s, 30m, 2h, 7d; --source "
        "kafka: the messages' timestamps, the largest read so far being the stream's time)",
    )
    join.add_argument(
        "--labels-topic",
        type=text,
        metavar="TOPIC",
        help="--source kafka: the outcomes' topic, beside one --topic of events, co-partitioned "
        "with it (as many partitions, both keyed by the join key): a worker reads partition p "
        "of both and merges them by message timestamp (an event first on a tie). With "
        "--model-topic each worker joins the partitions it owns, one store per partition "
        "(--max-pending and a --label-wait in records count per partition), kept in "
        "--join-changelog-topic",
    )
    join.add_argument(
        "--join-changelog-topic",
        type=text,
        metavar="TOPIC",
        help="--model-topic with --labels-topic: the compacted topic, co-partitioned with "
        "--topic, where each commit writes what waits of its partitions for their next owner "
        "(default: the model topic's name + '-join'; created if missing)",
    )
    kafka = run.add_argument_group(
        "kafka (--source kafka; SASL credentials come from the environment variables "
        "STREAM_PERCEPTRON_KAFKA_USERNAME and STREAM_PERCEPTRON_KAFKA_PASSWORD)"
    )
    kafka.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]", help="Kafka brokers")
    kafka.add_argument(
        "--topic",
        action="append",
        type=text,
        default=[],
        metavar="TOPIC",
        help="topic to consume (repeat)",
    )
    kafka.add_argument("--group", type=text, metavar="GROUP", help="consumer group id")
    add_client_flag(kafka, "; --kafka-option and --producer-option use its own names")
    kafka.add_argument(
        "--exit-at-end",
        action="store_true",
        help="stop (checkpoint and commit) once the end offsets seen at assignment are reached "
        "(shared-model mode: the mixing leader stays while the other workers still commit)",
    )
    kafka.add_argument(
        "--predictions-topic", type=text, metavar="TOPIC", help="produce predictions here"
    )
    kafka.add_argument(
        "--dead-letter-topic", type=text, metavar="TOPIC", help="produce bad records here"
    )
    add_security_flags(kafka)
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
        type=text,
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
        type=text,
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
        type=positive_int,
        metavar="N",
        help="about one mix per N examples of the group: every worker commits after its part "
        "of N records (N times its share of the input partitions), and the leader (the owner "
        "of partition 0 of the first topic) mixes at its commit once the committed examples "
        "that no mixture holds reach N/2 (it sees only what the others committed before it "
        "read); every worker then moves onto the mixture",
    )
    shared.add_argument(
        "--commit-in-background", action=argparse.BooleanOptionalAction, default=False,
        help="commit each transaction while learning the next records, one in flight (what "
        "comes meanwhile goes into the next transaction); default: wait for each commit "
        "(the background's speed is not measured yet)",
    )  # fmt: skip
    shared.add_argument(
        "--mix-interval",
        type=float_upto(MAX_SECONDS),
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
        type=float_upto(1e6),
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
        "--seed", type=int_in(0, 2**32 - 1), default=None, help="seed for --init random"
    )
    model.add_argument("--averaged", action="store_true", help="averaged perceptron")
    model.add_argument(
        "--average-half-life",
        type=half_life,
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
        type=float_upto(1e6),
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
        type=int_in(1, 32),
        default=None,
        metavar="B",
        help="hash feature names to 2^B buckets (MurmurHash3, Vowpal Wabbit's -b): memory "
        "bounded by B whatever the vocabulary; colliding features add up",
    )
    model.add_argument(
        "--rff-components",
        type=int_in(1, 1 << 16),
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
        type=float_upto(1e6),
        default=None,  # 1, set once checked: given without --rff-components is an error
        metavar="G",
        help="with --rff-components: the kernel width G of exp(-G ||x - x'||^2) (default 1). "
        "Larger is a more local boundary; with --scale standard and a few features, 0.5 to 4",
    )
    drift = run.add_argument_group("drift")
    drift.add_argument(
        "--drift-detector",
        choices=DETECTORS,
        default="adwin",
        help="watch the stream of mistakes for a rise of the error rate: adwin (ADWIN as River "
        "computes it, delta 0.002, on the mistake rate of chunks of 8 examples, checked every "
        "256 examples; a switch from 10%% to 30%% errors is seen after about 500 examples). "
        "Counted in stream_perceptron_drifts_total, the summary and the checkpoint; it costs "
        "about 0.01 us an example, under 2%% of the fastest runs. reference: ADWIN on every "
        "mistake of a frozen copy of the model, taken --drift-reference-after examples from "
        "the start and after each drift; it sees switches too small for a model that adapts "
        "to show in its own mistakes (SEA's), at the cost of a second prediction per example "
        "and ADWIN checked at every one (3x slower than adwin on the fastest runs, 9x with a drift "
        "every 12,500 examples). "
        "none: no detection (default adwin)",
    )
    drift.add_argument(
        "--drift-reference-after",
        type=positive_int,
        default=REFERENCE_AFTER,
        metavar="N",
        help="with --drift-detector reference: examples learned from the start and after "
        f"each drift before the model's copy is taken (default {REFERENCE_AFTER:,})",
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
        type=float_upto(MAX_SECONDS),
        metavar="SECONDS",
        help="with --ui: how long the page stays up after the stream ended (default: until "
        "Ctrl-C)",
    )
    metrics.add_argument(
        "--metrics-port",
        type=int_in(-1, 65535),
        metavar="PORT",
        help="serve /metrics, the live page (/) and its data (/api/state) on PORT (0: any free "
        "port; -1: off). Off by default for stdin, 9108 with --source kafka",
    )
    metrics.add_argument(
        "--metrics-host",
        type=listen_host,
        default="127.0.0.1",
        metavar="HOST",
        help="address (default 127.0.0.1; 0.0.0.0 for every interface). Bound to a loopback "
        "address, requests naming another Host are refused (DNS rebinding)",
    )
    metrics.add_argument(
        "--pushgateway", type=http_url, metavar="URL", help="push metrics to a Pushgateway"
    )
    metrics.add_argument(
        "--push-interval",
        type=float_upto(MAX_SECONDS),
        default=10.0,
        metavar="SECONDS",
        help="seconds between pushes (default 10; one more push at the end)",
    )
    metrics.add_argument(
        "--run-name",
        type=text,
        metavar="NAME",
        help="Pushgateway grouping label 'run' (default: host-pid)",
    )
    metrics.add_argument(
        "--metrics-max-weights",
        type=int_in(1, 100_000),
        default=50,
        metavar="K",
        help="weight series exposed: the K largest in absolute value (default 50)",
    )
    metrics.add_argument(
        "--rolling-window",
        type=int_in(1, 10_000_000),
        default=1000,
        metavar="N",
        help="examples in the rolling accuracy and margin window (default 1000)",
    )
    ck = run.add_argument_group("checkpoints")
    ck.add_argument("--checkpoint", metavar="PATH", help="save model and position here")
    ck.add_argument("--checkpoint-every", type=positive_int, metavar="N", help="every N records")
    ck.add_argument(
        "--checkpoint-interval",
        type=float_upto(MAX_SECONDS),
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
