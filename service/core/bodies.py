"""Raw registration and KV-import bodies before the NameServer applies them: the digest that tells an unchanged
registration without decoding it, the per-connection memo that spares hashing the same bytes again, and the
decoding of large bodies in a parser process, off the worker's event loop."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from service.models import RegisterBroker, boolean, kv_config, obj

T = TypeVar("T")

OFFLOAD_BYTES = 256 * 1024  # registration bodies from this size on (about 2 000 topics) are parsed in a process


def registration_digest(door_key: bytes, default_timeout_ms: int, raw: bytes) -> str:
    """What decides that a registration is unchanged without decoding it: SHA-256 of the door's key (its header
    fields and how it decodes), the default heartbeat timeout, and the raw body as received.

    Why this and not the data version or the broker's bodyCrc32: SHA-256 is collision-resistant, so equal digests
    mean byte-identical input, hence the same identity, data version, topic table and filter servers whatever
    the door makes of the bytes (a zipped body sent with `compressed=false`, as stock 5.x brokers do, is the
    same bytes each time: Deflater is deterministic). Different bytes of the same table only cost a full
    registration. The data version is the broker's claim, not the table: HTTP clients and old brokers may keep
    it while the table changes, and a broker may restart with another table at the same version. CRC32 (32
    bits, linear) is made to catch transmission errors, not to tell tables apart: about one changed
    registration in four billion would be taken for unchanged and its routes would stay stale. Hashing costs
    the worker ~0.5 ms per MB (sha256 with SHA extensions), far less than decoding."""
    return _sha256(digest_key(door_key, default_timeout_ms), raw)


def digest_key(door_key: bytes, default_timeout_ms: int) -> bytes:
    return door_key + b"\0%d\0" % default_timeout_ms


class RegistrationMemo:
    """The last registration body seen on one connection, its digest and the bodyCrc32 it was checked against.

    A stock broker re-sends the same bytes on the same connection every 30 s: comparing them with the last ones
    (memcmp, ~15 µs for the 250 kB of a compressed 100 000-topic body) costs a fraction of hashing them again
    (~125 µs) or of their CRC32 (~40 µs). Equal bytes have equal digests and CRCs, so nothing is assumed. Bodies
    over MAX_BYTES are not kept (a plain 100 000-topic body is ~17 MB per connection)."""

    MAX_BYTES = 1024 * 1024
    __slots__ = ("key", "body", "digest", "crc")

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.body: bytes | None = None
        self.digest = ""
        self.crc = 0  # a bodyCrc32 that `body` was verified against (0 = none)

    def crc_known(self, body: bytes, crc: int) -> bool:
        """`body` is the kept body and was verified against this very bodyCrc32."""
        return self.body is not None and self.crc == crc and self.body == body

    def holds(self, key: bytes, body: bytes) -> bool:
        """The same header and bytes as the last registration kept: `digest` is theirs."""
        return self.body is not None and self.key == key and self.body == body

    def other_than_last(self, key: bytes, body: bytes) -> bool:
        """This connection's last registration was kept, came with the same header (the same broker) and had other
        bytes: a changed registration, which the unchanged path would only refuse (a Redis round trip for
        nothing). Another broker's registration in between (one connection carrying several) says nothing."""
        return self.body is not None and self.key == key and self.body != body

    def digest_of(self, key: bytes, body: bytes) -> str:
        if self.holds(key, body):
            return self.digest
        digest = _sha256(key, body)
        if len(body) <= self.MAX_BYTES:
            self.key, self.body, self.digest, self.crc = key, bytes(body), digest, 0
        return digest


def _sha256(key: bytes, body: bytes) -> str:
    h = hashlib.sha256(key)
    h.update(body)
    return h.hexdigest()


IN_THREAD_BYTES = 1024 * 1024


async def over_body(body: bytes, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, a pass over `body` (a digest, a checksum), in a thread for a body over IN_THREAD_BYTES (hashlib
    and zlib let go of the GIL while they run): a plain 100 000-topic body, 17.8 MB, held the worker's event loop
    ~20 ms for its SHA-256 and ~10 ms for its CRC32, and its route reads with it."""
    if len(body) > IN_THREAD_BYTES:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


def parse_registration(decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker], raw: bytes) -> RegisterBroker:
    """A door's decode, then RegisterBroker's validation (a door may hand back a RegisterBroker already)."""
    decoded = decode(raw)
    return decoded if isinstance(decoded, RegisterBroker) else RegisterBroker.parse(decoded)


def prepare_registration(decode: Callable[[bytes], Mapping[str, Any] | RegisterBroker], raw: bytes
                         ) -> RegisterBroker:
    """Decode and validate a registration body, topics compacted: what a parser process sends back."""
    return parse_registration(decode, raw).compact()


class ParserPool:
    """The worker's parser process, started on first use without stalling the event loop: making the executor
    (multiprocessing's resource tracker spawned, its modules imported) and its first submit (the process spawned)
    held a worker's loop for ~40 ms at its first large registration, beside a fleet's route reads (stall_bench),
    so both happen in a thread. Concurrent first uses share one start."""

    def __init__(self) -> None:
        self.executor: ProcessPoolExecutor | None = None
        self._starting: asyncio.Future[ProcessPoolExecutor] | None = None

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the parser process (`fn` and its arguments picklable)."""
        executor = self.executor if self.executor is not None else await self._start()
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _start(self) -> ProcessPoolExecutor:
        if self._starting is None:
            self._starting = asyncio.ensure_future(asyncio.to_thread(_started_pool))
        try:
            executor = await asyncio.shield(self._starting)
        except BaseException:
            if self._starting.done():  # the start itself failed: the next use tries again
                self._starting = None
            raise
        if self.executor is None:
            self.executor = executor
        return self.executor

    def shutdown(self) -> None:
        starting, self._starting = self._starting, None
        executor, self.executor = self.executor, None
        if executor is None and starting is not None and starting.done() and not starting.cancelled() \
                and starting.exception() is None:
            executor = starting.result()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _started_pool() -> ProcessPoolExecutor:
    """A parser pool whose process is being spawned (a no-op submitted), in the calling thread."""
    pool = parser_pool()
    pool.submit(int)
    return pool


def parser_pool() -> ProcessPoolExecutor:
    """The worker's parser process for large bodies (spawned, so it holds none of the worker's state), which ends
    with the worker however the worker ends."""
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_end_with_parent,
                               initargs=(os.getpid(),))


def _end_with_parent(parent: int) -> None:
    """In the parser process: exit once the worker that started it is gone. A worker SIGKILLed (the OOM killer, a
    fault test) left it waiting for good on a pipe whose other end it holds itself, with multiprocessing's
    resource tracker beside it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="end-with-worker", daemon=True).start()


def parse_kv_import(decode: Callable[[bytes], Any], raw: bytes) -> tuple[dict[str, dict[str, str]], bool, bool]:
    """A KV import body, {configTable, replace?, dryRun?}, decoded and checked entry by entry (kv_config): the
    table, replace, dry run. Large ones are parsed in a parser process, as large registrations are."""
    body = obj(decode(raw), "body")
    return (kv_config(body.get("configTable")), bool(boolean(body.get("replace"), "replace")),
            bool(boolean(body.get("dryRun"), "dryRun")))
