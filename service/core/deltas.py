"""The topic table of the last registration this worker sent for each broker: what its next, changed registration
is sent against (TopicDelta, registerBroker's delta mode).

A stock broker re-sends its whole topic table whenever one topic changes (and every 30 s unchanged, which the
unchanged path answers). Writing only what differs spares Redis the comparison of every topic's queue data and
most of the bytes (benchmarks/README.md). The base is a guess, never trusted: the store applies a delta only
while the broker's queue data are exactly the base's table (its digest and topic token in the live info); any
other registration of the broker meanwhile (another connection, another worker, an admin change) makes it apply
the whole table sent with the delta instead. Keyed by the registration's header as the digest covers it (the same
broker, the same identity and flags), so the connections a broker registers on share it.

Kept as the table's groups only (TopicTable.compact, ~15 bytes a topic) and bounded in topics held: the oldest
bases go first, and a broker whose base is gone sends its next changed registration whole.
"""

from __future__ import annotations

from service.models import TopicTable

MAX_TOPICS = 1_000_000


class RegistrationBases:
    def __init__(self, max_topics: int = MAX_TOPICS) -> None:
        self._bases: dict[bytes, tuple[str, TopicTable]] = {}  # header key -> (digest, topic table)
        self.topics = 0
        self.max_topics = max_topics
        self.applied = 0  # changed registrations Redis applied as deltas
        self.refused = 0  # ... and those it applied whole (its table was not the base's)

    def __len__(self) -> int:
        return len(self._bases)

    def get(self, key: bytes) -> tuple[str, TopicTable] | None:
        return self._bases.get(key)

    def sent(self, key: bytes, digest: str, table: TopicTable) -> None:
        """A registration with this header, digest and table is on its way to the store: the next one's base."""
        old = self._bases.pop(key, None)
        if old is not None:
            self.topics -= old[1].count
        if table.count > self.max_topics:
            return
        while self.topics + table.count > self.max_topics:
            self.topics -= self._bases.pop(next(iter(self._bases)))[1].count
        self._bases[key] = (digest, table.compact())
        self.topics += table.count
