"""Kafka, written once over a narrow port, with one adapter per client.

The client-neutral core:

* :mod:`~connectors.kafka.group_source` (the loop, commits, closing) over
  :mod:`~connectors.kafka.books` (assignment, positions, ends, lag) and
  :mod:`~connectors.kafka.poll_units` (what a poll hands on);
* :mod:`~connectors.kafka.topic_sink` (a topic sink; a sink into the current transaction);
* :mod:`~connectors.kafka.model_log` (the compacted model topic of shared-model mode);
* :mod:`~connectors.kafka.transactions` (outputs, model records and offsets, all or nothing);
* :mod:`~connectors.kafka.common` (client options, message splitting, checks).

Each role is a base class whose broker calls are hooks (the port: consume a batch, seek,
commit, produce, begin/commit/abort a transaction, describe a topic). A client adapter
implements them: kafka-python in :mod:`~connectors.kafka.kafka_python` (consumers) and
:mod:`~connectors.kafka.kafka_python_producer` (producers), confluent-kafka in
:mod:`~connectors.kafka.librdkafka` and :mod:`~connectors.kafka.librdkafka_producer`. A
client's library, and every use of its private internals, stays in its adapter; nothing here
imports a client library at import time.
"""
