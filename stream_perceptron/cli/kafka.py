"""``--source kafka``: the Kafka source and topic sinks built from command-line options, with
the client ``--kafka-client`` names (the engine never knows which)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.errors import StreamPerceptronError

if TYPE_CHECKING:  # imported when used: a run without a key file starts without it
    from stream_perceptron.sharing.signing import RecordSigner

__all__ = [
    "KafkaSecurity",
    "client_options",
    "model_topic_signer",
    "kafka_source",
    "kafka_outputs",
    "missing_client",
    "resolve_client",
    "shared_model",
    "pull_model_command",
]

USERNAME_ENV = "STREAM_PERCEPTRON_KAFKA_USERNAME"
PASSWORD_ENV = "STREAM_PERCEPTRON_KAFKA_PASSWORD"
KAFKA_PYTHON = "kafka-python"
CONFLUENT_KAFKA = "confluent-kafka"
AUTO = "auto"

logger = logging.getLogger(__name__)

# Our flags (and the credentials) in each client's naming: kafka-python, librdkafka.
_NAMES = {
    "security_protocol": ("security_protocol", "security.protocol"),
    "sasl_mechanism": ("sasl_mechanism", "sasl.mechanism"),
    "ssl_cafile": ("ssl_cafile", "ssl.ca.location"),
    "ssl_certfile": ("ssl_certfile", "ssl.certificate.location"),
    "ssl_keyfile": ("ssl_keyfile", "ssl.key.location"),
    "username": ("sasl_plain_username", "sasl.username"),
    "password": ("sasl_plain_password", "sasl.password"),
    "instance_id": ("group_instance_id", "group.instance.id"),
}


def _name(option: str, client: str) -> str:
    return _NAMES[option][client == CONFLUENT_KAFKA]


def resolve_client(client: str) -> str:
    """The client ``--kafka-client client`` means: ``auto`` is confluent-kafka (librdkafka)
    where it can be imported, else kafka-python with a one-line notice of the faster one;
    a named client is itself (:func:`missing_client` says whether it can be used).

    Examples
    --------
    >>> resolve_client("kafka-python")
    'kafka-python'
    >>> resolve_client("auto") in ("confluent-kafka", "kafka-python")
    True
    """
    if client != AUTO:
        return client
    if missing_client(CONFLUENT_KAFKA) is None:
        logger.info("Kafka client: confluent-kafka (librdkafka; --kafka-client auto)")
        return CONFLUENT_KAFKA
    if missing_client(KAFKA_PYTHON) is None:
        logger.warning(
            "using kafka-python, the slower Kafka client (confluent-kafka is not installed): "
            "pip install 'stream-perceptron[rdkafka]' for librdkafka, about 5x faster; "
            "--kafka-client kafka-python keeps this one without this notice"
        )
        return KAFKA_PYTHON
    return AUTO  # neither: missing_client(AUTO) says so


def missing_client(client: str) -> str | None:
    """Why the Kafka client ``client`` cannot be used here (``None``: it can).

    Examples
    --------
    >>> missing_client("kafka-python") is None
    True
    """
    if client == AUTO:
        if missing_client(CONFLUENT_KAFKA) is None or missing_client(KAFKA_PYTHON) is None:
            return None
        return (
            "Kafka needs a client library: pip install kafka-python (the declared dependency) "
            "or 'stream-perceptron[rdkafka]' (confluent-kafka, librdkafka, faster)"
        )
    if client == CONFLUENT_KAFKA:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            return (
                "--kafka-client confluent-kafka needs the confluent-kafka package: "
                "pip install 'stream-perceptron[rdkafka]'"
            )
        return None
    try:
        import kafka  # noqa: F401
    except ImportError:
        return (
            "--kafka-client kafka-python needs the kafka-python package: pip install "
            "kafka-python (or give --kafka-client confluent-kafka)"
        )
    return None


@dataclasses.dataclass(frozen=True)
class KafkaSecurity:
    """The security flags of a command that talks to Kafka (``run``, ``pull-model``)."""

    FLAGS: ClassVar[tuple[str, ...]] = (
        "security_protocol",
        "sasl_mechanism",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
    )

    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> KafkaSecurity:
        """The security flags of a parsed command line."""
        given = vars(args)
        return cls(**{name: given[name] for name in cls.FLAGS})


def client_options(security: KafkaSecurity, client: str = KAFKA_PYTHON) -> dict[str, Any]:
    """Security settings in ``client``'s naming; credentials only from the environment.

    Examples
    --------
    >>> ns = KafkaSecurity(security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
    ...                    ssl_cafile="ca.pem")
    >>> os.environ[USERNAME_ENV], os.environ[PASSWORD_ENV] = "alice", "secret"
    >>> sorted(client_options(ns))  # doctest: +NORMALIZE_WHITESPACE
    ['sasl_mechanism', 'sasl_plain_password', 'sasl_plain_username', 'security_protocol',
     'ssl_cafile']
    >>> sorted(client_options(ns, "confluent-kafka"))
    ['sasl.mechanism', 'sasl.password', 'sasl.username', 'security.protocol', 'ssl.ca.location']
    >>> del os.environ[USERNAME_ENV], os.environ[PASSWORD_ENV]

    """
    options: dict[str, Any] = {}
    for name in KafkaSecurity.FLAGS:
        value = getattr(security, name)
        if value:
            options[_name(name, client)] = value
    if security.sasl_mechanism:
        username, password = os.environ.get(USERNAME_ENV), os.environ.get(PASSWORD_ENV)
        if not username or password is None:
            raise StreamPerceptronError(
                f"--sasl-mechanism needs the environment variables {USERNAME_ENV} and "
                f"{PASSWORD_ENV} (credentials are never taken from the command line)"
            )
        options[_name("username", client)] = username
        options[_name("password", client)] = password
    return options


def consumer_options(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` settings for a client (consumer or producer); whole numbers become ints.

    Examples
    --------
    >>> consumer_options(["session_timeout_ms=6000", "client_id=engine-1"])
    {'session_timeout_ms': 6000, 'client_id': 'engine-1'}

    """
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise StreamPerceptronError(f"the Kafka option {pair!r} is not NAME=VALUE")
        options[name.strip()] = int(value) if value.strip().lstrip("-").isdigit() else value
    return options


def kafka_source(args: argparse.Namespace, engine: Engine) -> Any:
    """A consumer-group source that resumes partitions where the engine's model left them
    (with ``--labels-topic``, its topics merged by timestamp)."""
    from connectors import KafkaSource, RdKafkaSource

    client = args.kafka_client
    source_class = RdKafkaSource if client == CONFLUENT_KAFKA else KafkaSource
    instance = {_name("instance_id", client): args.instance_id} if args.instance_id else {}
    topics = [*args.topic, args.labels_topic] if args.labels_topic else args.topic
    source = source_class(
        args.bootstrap_servers.split(","),
        topics,
        args.group,
        on_assign=engine.coordinator.assigned,
        on_revoke=engine.coordinator.revoked,
        on_idle=engine.coordinator.idle,
        exit_at_end=args.exit_at_end,
        hold_at_end=engine.coordinator.hold_at_end,
        max_line_bytes=args.max_line_bytes,
        client_options={
            **consumer_options(args.kafka_option),
            **client_options(KafkaSecurity.from_args(args), client),
            **instance,
        },
    )
    if not args.labels_topic:
        return source
    from connectors.kafka.merge import MergedSource  # events and outcomes, by timestamp

    return MergedSource(source, topics)


def kafka_outputs(args: argparse.Namespace, outputs: Outputs) -> Outputs:
    """Replace file outputs by topic sinks where ``--*-topic`` options ask for them."""
    from connectors import KafkaSink, RdKafkaSink

    client = args.kafka_client
    sink_class = RdKafkaSink if client == CONFLUENT_KAFKA else KafkaSink
    servers = args.bootstrap_servers.split(",")
    security = client_options(KafkaSecurity.from_args(args), client)
    options = {**consumer_options(args.producer_option), **security}
    if args.predictions_topic:
        if outputs.predictions is not None:
            raise StreamPerceptronError("give --predictions or --predictions-topic, not both")
        outputs.predictions = sink_class(servers, args.predictions_topic, client_options=options)
    if args.dead_letter_topic:
        if outputs.dead_letters is not None:
            raise StreamPerceptronError("give --dead-letter or --dead-letter-topic, not both")
        outputs.dead_letters = sink_class(servers, args.dead_letter_topic, client_options=options)
    return outputs


def _transactions_class(client: str) -> Any:
    """The :class:`~connectors.kafka.transactions.TransactionalOutput` of ``client``."""
    if client == CONFLUENT_KAFKA:
        from connectors.kafka.librdkafka_producer import RdKafkaTransactions

        return RdKafkaTransactions
    from connectors.kafka.kafka_python_producer import KafkaTransactions

    return KafkaTransactions


def _model_log_class(client: str) -> Any:
    """The :class:`~connectors.kafka.model_log.ModelLog` of ``client``."""
    if client == CONFLUENT_KAFKA:
        from connectors.kafka.librdkafka_model_log import RdKafkaModelLog

        return RdKafkaModelLog
    from connectors.kafka.kafka_python import KafkaModelLog

    return KafkaModelLog


def shared_model(args: argparse.Namespace, outputs: Outputs) -> tuple[Any, Outputs]:
    """``--model-topic``: this worker's coordinator (transactions, model topic, mixing) and
    its outputs, topic sinks writing into its transactions."""
    from connectors.kafka.topic_sink import TransactionalSink
    from stream_perceptron.sharing.coordinator import SharedModelCoordinator

    client = args.kafka_client
    servers = args.bootstrap_servers.split(",")
    worker = args.instance_id or f"{socket.gethostname()}-{os.getpid()}"
    security = client_options(KafkaSecurity.from_args(args), client)
    transactions = _transactions_class(client)(
        servers,
        f"stream-perceptron-{args.group}-{worker}",
        client_options={**consumer_options(args.producer_option), **security},
    )
    if args.commit_in_background:  # the engine learns on while a transaction commits
        from connectors.kafka.background_commits import BackgroundCommits

        transactions = BackgroundCommits(transactions)
    mix_interval = args.mix_interval
    if mix_interval is None and args.mix_every is None:
        mix_interval = 5.0
    coordinator = SharedModelCoordinator(
        _model_log_class(client)(servers, args.model_topic, client_options=security),
        transactions,
        args.model_topic,
        worker,
        every=args.checkpoint_every,
        interval=args.checkpoint_interval or (None if args.checkpoint_every else 1.0),
        mix_every=args.mix_every,
        mix_interval=mix_interval,
        leader=(sorted(args.topic)[0], 0),  # one mixer, whatever each worker is assigned
        adopt_settings=args.adopt_model_settings,
    )
    coordinator.view.signer = args.model_topic_signer

    def headers() -> list[tuple[str, bytes]]:
        return [("model_version", str(coordinator.version).encode()), ("worker", worker.encode())]

    if args.predictions_topic:
        outputs.predictions = TransactionalSink(
            transactions, args.predictions_topic, headers=headers
        )
    if args.dead_letter_topic:
        outputs.dead_letters = TransactionalSink(
            transactions, args.dead_letter_topic, headers=headers
        )
    return coordinator, outputs


def shared_join(args: argparse.Namespace, coordinator: Any) -> Any:
    """``--join-key`` in shared-model mode: a store per partition task, kept in
    ``--join-changelog-topic`` (the coordinator writes and restores it)."""
    from stream_perceptron.cli.flags import Millis
    from stream_perceptron.join.tasks import JoinTasks
    from stream_perceptron.sharing.join_changelog import JoinChangelog

    client = args.kafka_client
    servers = args.bootstrap_servers.split(",")
    security = client_options(KafkaSecurity.from_args(args), client)
    by_time = isinstance(args.label_wait, Millis)
    tasks = JoinTasks(args.max_pending, args.label_wait, args.topic[0], by_time=by_time)
    log_class = _model_log_class(client)

    def reader(partition: int) -> Any:
        log = log_class(servers, args.join_changelog_topic, client_options=security,
                        partition=partition)  # fmt: skip
        log.kind = "the join changelog topic"
        return log

    signer = args.model_topic_signer
    coordinator.join_log = JoinChangelog(
        tasks, args.join_changelog_topic, reader, coordinator.output,
        None if signer is None else signer.for_join_changelog(),
    )  # fmt: skip
    return tasks


def pull_model_command(args: argparse.Namespace) -> int:
    """``pull-model``, its ``--output`` checked as ``run --checkpoint`` is (a regular file, an
    existing one only with ``--force``) and locked while it is written."""
    from stream_perceptron.checkpoint.lock import CheckpointLock, CheckpointLockedError
    from stream_perceptron.paths import READ, file_flag_problem, state_file_problem

    problem = file_flag_problem([
        ("--model-topic-key-file", args.model_topic_key_file, READ),
        ("--ssl-cafile", args.ssl_cafile, READ),
        ("--ssl-certfile", args.ssl_certfile, READ),
        ("--ssl-keyfile", args.ssl_keyfile, READ),
    ])  # fmt: skip
    if problem is None:
        why = state_file_problem(args.output, replace=args.force)
        if why is not None:
            advice = ": give --force to replace it" if why == "exists" else ""
            problem = f"--output {args.output or repr(args.output)}: {why}{advice}"
    if problem is not None:
        print(f"stream-perceptron: error: {problem}", file=sys.stderr)
        return 2
    try:
        lock = CheckpointLock(args.output).acquire()  # not while a run writes it
    except CheckpointLockedError as e:
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"stream-perceptron: error: cannot lock --output: {e}", file=sys.stderr)
        return 1
    try:
        return _pull_model(args)
    finally:
        lock.release()


def _pull_model(args: argparse.Namespace) -> int:
    """``stream-perceptron pull-model``: the cluster's current model as a checkpoint file."""
    from connectors import ConnectorError
    from connectors.kafka.model_log import ModelTopicError
    from stream_perceptron.checkpoint import Checkpoint, save_checkpoint
    from stream_perceptron.sharing.pull import incomplete, pull_model

    client = resolve_client(args.kafka_client)
    unusable = missing_client(client)
    if unusable:
        print(f"stream-perceptron: error: {unusable}", file=sys.stderr)
        return 2
    try:
        signer = model_topic_signer(args.model_topic_key_file)
    except StreamPerceptronError as e:
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return 2
    security = client_options(KafkaSecurity.from_args(args), client)
    log = _model_log_class(client)(
        args.bootstrap_servers.split(","), args.model_topic, client_options=security
    )
    try:
        log.ensure(create=False)  # never creates it (a mistyped name is an error)
        model, version, offsets, view = pull_model(log, signer)
        gap = incomplete(model, view)
        if gap is not None and not args.allow_incomplete:  # a model that looks like the whole
            print(f"stream-perceptron: error: {gap}: not writing {args.output} (give "
                  "--allow-incomplete to write it anyway)", file=sys.stderr)  # fmt: skip
            return 1
        if gap is not None:
            logger.warning("%s: written anyway (--allow-incomplete)", gap)
        save_checkpoint(args.output, Checkpoint(model=model, next_offsets=dict(offsets)))
    except ModelTopicError as e:
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return 2
    except (StreamPerceptronError, ConnectorError, OSError) as e:
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return 1
    finally:
        log.close()
    if not args.quiet:
        refused = ", ".join(f"{n} {reason}" for reason, n in sorted(view.rejected.items()))
        print(
            f"stream-perceptron: wrote mixture version {version} ({model.n_seen} examples, "
            f"{len(offsets)} partitions) to {args.output}"
            + (f"; model-topic records refused and skipped: {refused}" if refused else ""),
            file=sys.stderr,
        )
    return 0


def model_topic_signer(
    path: str | None, parser: argparse.ArgumentParser | None = None
) -> RecordSigner | None:
    """The signer of ``--model-topic-key-file`` (``None`` without one); a file that cannot
    be read or is too short is a usage error (exit 2)."""
    if not path:
        return None
    from stream_perceptron.sharing.signing import load_key_file

    try:
        return load_key_file(path)
    except (OSError, ValueError) as e:
        message = f"--model-topic-key-file: {e}"
        if parser is None:
            raise StreamPerceptronError(message) from e
        parser.error(message)
