"""``--model-topic-key-file``: the group's secret key, and an HMAC-SHA256 of each model-topic
record the workers write, carried in a record header, so that a record without the group's
key is refused (reasons ``unsigned`` and ``bad_signature``) even where the topic's ACLs are
loose.

What it protects against: records written by anyone who does not hold the key (a client with
write access it should not have, a valid record's value under another key). A signed record
written again as it was (a replay) keeps its signature: what it says refuses it instead
(reason ``replayed``, :mod:`~stream_perceptron.sharing.view`), since a partition's record, the
chain of mixtures and a worker's increments only move forward in the log. That holds for every
reader that read the newer record before the copy; a copy written after a key's newest record
and read only once compaction removed that record is taken (the group writes its newest
records again while it runs, so this needs the partition idle, or no leader, until then). What
it does not protect against: a worker's key leaking (every holder can sign anything), deletion
(the broker compacts a tombstone away whatever it carries: a stranger's tombstone is ignored by
readers, but can still remove the record it names at the next compaction), and reading (the
records are signed, not encrypted). The ACLs stay the first line.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
from pathlib import Path

from stream_perceptron.sharing.records import RecordFormatError

__all__ = ["HEADER", "MIN_KEY_BYTES", "RecordSigner", "load_key_file"]

logger = logging.getLogger(__name__)

#: the record header carrying the signature (hex HMAC-SHA256)
HEADER = "stream-perceptron-hmac"
#: the shortest key accepted (HMAC-SHA256's own block of security: 32 bytes)
MIN_KEY_BYTES = 32
_DOMAIN = b"stream-perceptron model-topic record v1\x00"
#: the join changelog's records (``--join-changelog-topic``) are signed in a domain of their
#: own: a signed changelog record copied into the model topic (a join key can be any name a
#: model-topic key has) is not a signed model-topic record, nor the other way round
_CHANGELOG_DOMAIN = b"stream-perceptron join-changelog record v1\x00"

Headers = list[tuple[str, bytes]]


class RecordSigner:
    """Signs and checks model-topic records with the group's key.

    The signature covers the record's key and value, each length-prefixed (no two records
    share one), and whether the value is a tombstone.

    Examples
    --------
    >>> signer = RecordSigner(b"k" * 32)
    >>> headers = signer.headers(b"mixture", b'{"v": 1}')
    >>> signer.check(b"mixture", b'{"v": 1}', headers)
    >>> signer.check(b"mixture", b'{"v": 2}', headers)
    Traceback (most recent call last):
    ...
    stream_perceptron.sharing.records.RecordFormatError: its signature is not the group key's
    >>> signer.check(b"mixture", b'{"v": 1}', None)
    Traceback (most recent call last):
    ...
    stream_perceptron.sharing.records.RecordFormatError: no stream-perceptron-hmac header
    """

    def __init__(self, key: bytes, *, _domain: bytes = _DOMAIN) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a model-topic key needs {MIN_KEY_BYTES} bytes or more")
        self._key = bytes(key)
        self._domain = _domain

    def for_join_changelog(self) -> RecordSigner:
        """The same key's signer of the join changelog's records (a domain of their own).

        >>> signer = RecordSigner(b"k" * 32)
        >>> signer.for_join_changelog().check(b"a", b"1", signer.headers(b"a", b"1"))
        Traceback (most recent call last):
        ...
        stream_perceptron.sharing.records.RecordFormatError: its signature is not the group key's
        """
        return RecordSigner(self._key, _domain=_CHANGELOG_DOMAIN)

    def _digest(self, key: bytes | None, value: bytes | None) -> bytes:
        mac = hmac.new(self._key, self._domain, hashlib.sha256)
        for part in (key, value):
            if part is None:
                mac.update(b"\x00")
            else:
                mac.update(b"\x01" + len(part).to_bytes(8, "big") + part)
        return mac.hexdigest().encode()

    def headers(self, key: bytes | None, value: bytes | None) -> Headers:
        """The header to send with a record."""
        return [(HEADER, self._digest(key, value))]

    def check(self, key: bytes | None, value: bytes | None, headers: Headers | None) -> None:
        """Nothing for a record signed with the group's key.

        Raises
        ------
        RecordFormatError
            ``unsigned`` without the header (or with several), ``bad_signature`` when it is
            not this key's signature of this key and value.
        """
        found = [v for k, v in headers or () if k == HEADER]
        if len(found) != 1:
            raise RecordFormatError(
                f"no {HEADER} header" if not found else f"{len(found)} {HEADER} headers",
                "unsigned",
            )
        if not isinstance(found[0], bytes) or not hmac.compare_digest(
            found[0], self._digest(key, value)
        ):
            raise RecordFormatError("its signature is not the group key's", "bad_signature")


def load_key_file(path: str | os.PathLike[str]) -> RecordSigner:
    """The signer of the key in ``path`` (its bytes, a trailing newline dropped). A file other
    users can read is used, with a warning.

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        If it holds fewer than :data:`MIN_KEY_BYTES` bytes.
    """
    file = Path(path)
    key = file.read_bytes().rstrip(b"\r\n")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"the model-topic key file {str(file)!r} holds {len(key)} bytes: it needs "
            f"{MIN_KEY_BYTES} or more (e.g. head -c 32 /dev/urandom | base64 > {file.name})"
        )
    mode = file.stat().st_mode
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        logger.warning("the model-topic key file %r can be read by other users (chmod 600)",
                       str(file))  # fmt: skip
    return RecordSigner(key)
