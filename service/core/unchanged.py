"""Unchanged registrations answered from the worker's memory while nothing that could change the answer happened.

Stock brokers re-send their whole registration every 30 s, nearly always the same bytes. The store answers such a
registration in O(1) (registerBroker's unchanged mode), but a Redis round trip each cost us 2.5x Java's CPU at 100
topics. Once the store has confirmed the bytes under a digest as unchanged for a connection, this worker answers
the same bytes on the same connection again from memory, records the broker's liveness for the next batch
(service/core/liveness.py), and asks Redis nothing, until the registration state of that broker may have
changed: every script that changes a broker's queue data, addresses, liveness (removal) or its registration
publishes "!<brokerName>" ("!*": every broker, the order-topic table the answers carry), and the route cache's
listener drops the answers of that broker here; a flush of the route cache (a missed event, a resubscription, a
stale subscription) drops them all, and none is used while the route cache is not fresh. A change this worker
makes itself (a registration in full, an unregistration, a closed connection's drop, an expiry, an admin write)
drops the answers it affects on the spot, before it is acknowledged (NameServer._changed), not when its event
comes back.

An answer confirmed before an invalidation that arrived while the store was being asked is never kept (epoch).
What an acknowledgement means is the heartbeat's (liveness.py): a registration answered from memory in the instant
between another worker changing the broker (removing it, deleting one of its topics, registering other bytes of it)
and this worker hearing of it (a pub/sub delivery) is acknowledged but not applied; the broker's next registration,
its state changed, goes to the store and is applied in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.models import RegisterBrokerResult

MAX_ANSWERS = 100_000  # one per connection and broker: far more brokers than a cluster has


@dataclass(frozen=True, slots=True)
class Answer:
    broker_name: str
    cluster: str
    broker_addr: str
    result: RegisterBrokerResult


class UnchangedAnswers:
    def __init__(self, max_answers: int = MAX_ANSWERS) -> None:
        self._answers: dict[tuple[str, str], Answer] = {}  # (digest, connection) -> answer
        self._by_broker: dict[str, set[tuple[str, str]]] = {}
        self._by_connection: dict[str, set[tuple[str, str]]] = {}
        self._by_member: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (cluster, brokerAddr) -> keys
        self.max_answers = max_answers
        self.epoch = 0  # bumped by every invalidation: an answer confirmed across one is not kept
        self.hits = 0

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, digest: str, connection: str) -> Answer | None:
        """The answer the store confirmed for these bytes on this connection ("": the HTTP door), if still valid."""
        answer = self._answers.get((digest, connection))
        if answer is not None:
            self.hits += 1
        return answer

    def put(self, epoch: int, digest: str, connection: str, answer: Answer) -> None:
        """Keep the store's confirmation, unless an invalidation came in since `epoch` was read (before asking)."""
        if epoch != self.epoch:
            return
        key = (digest, connection)
        self._forget(key)
        while len(self._answers) >= self.max_answers:
            self._forget(next(iter(self._answers)))
        self._answers[key] = answer
        self._by_broker.setdefault(answer.broker_name, set()).add(key)
        self._by_connection.setdefault(connection, set()).add(key)
        self._by_member.setdefault((answer.cluster, answer.broker_addr), set()).add(key)

    def invalidate(self, broker_names: list[str] | None) -> None:
        """The registration state of these brokers (None: of every broker) may have changed."""
        self.epoch += 1
        if broker_names is None:
            self._answers.clear()
            self._by_broker.clear()
            self._by_connection.clear()
            self._by_member.clear()
            return
        for name in broker_names:
            for key in list(self._by_broker.get(name, ())):
                self._forget(key)

    def holding(self, cluster: str, broker_addr: str) -> set[str]:
        """The brokers with answers for this address (one that registers under another brokerName leaves them)."""
        return {self._answers[key].broker_name for key in self._by_member.get((cluster, broker_addr), ())}

    def connection_closed(self, connection: str) -> None:
        for key in list(self._by_connection.get(connection, ())):
            self._forget(key)

    def _forget(self, key: tuple[str, str]) -> None:
        answer = self._answers.pop(key, None)
        if answer is None:
            return
        _unindex(self._by_broker, answer.broker_name, key)
        _unindex(self._by_connection, key[1], key)
        _unindex(self._by_member, (answer.cluster, answer.broker_addr), key)


def _unindex(index: dict[Any, set[tuple[str, str]]], name: Any, key: tuple[str, str]) -> None:
    keys = index.get(name)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[name]


class UnchangedOdds:
    """Whether a registration is worth trying as unchanged first. A fleet's cold start sends only first
    registrations, which the unchanged path can never apply: each try was a Redis round trip inside the
    registration's turn for nothing (5 000 brokers: 5 000 extra calls). While fewer than LOW of the last WINDOW
    tries were applied, bodies up to SMALL bytes go straight to the full path, all but one in PROBE, which still
    tries so that the odds recover when the fleet re-registers the same bytes (a worker restarted under a running
    fleet: nearly all tries apply). Larger bodies are always tried: not decoding them is what the path is for."""

    WINDOW = 64
    LOW = 0.25
    SMALL = 256 * 1024
    PROBE = 8

    def __init__(self) -> None:
        self._recent: list[bool] = []
        self._hits = 0
        self._passed = 0
        self.skipped = 0  # registrations sent straight to the full path (metrics)

    def worth_trying(self, size: int) -> bool:
        if size > self.SMALL or len(self._recent) < self.WINDOW or self._hits >= self.LOW * self.WINDOW:
            return True
        self._passed += 1
        if self._passed % self.PROBE == 0:
            return True
        self.skipped += 1
        return False

    def tried(self, applied: bool) -> None:
        self._recent.append(applied)
        self._hits += applied
        if len(self._recent) > self.WINDOW:
            self._hits -= self._recent.pop(0)
