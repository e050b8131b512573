"""A worker's copy of the all-topics list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET /v1/topics), kept while the
registry's `{P}:tlver` holds.

Mode "all" of topicList walks `{P}:topics` a page at a time: at 100 000 topics one read ran 100 topicList calls
and the worker encoded 100 000 names, ~200 ms, on every read (benchmarks/README.md, "Topic list"). Every script
that adds a topic to the set or removes one renews `{P}:tlver` (`topic_add` / `topic_drop_if_unserved` in
lua/includes/common.lua), and every page of the walk returns the value it read: pages that all read one value are
exactly the set at that value. So a read GETs the counter (one command) and, while it is the copy's, answers the
copy and the bytes each door encoded of it. Only the plain list is kept: the unit modes depend on queue data flags,
which change without the set changing.

The copy's rules (shared misses, read-your-writes, MAX_AGE_S) are service/core/versioned_copies.py's, as the
cluster info's copy's are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from service.core.versioned_copies import VersionedCopies
from service.models import TopicList


class TopicLists(VersionedCopies[TopicList]):
    """The all-topics list at `{P}:tlver`, from a RouteStore's topic_list_version and topic_list_at("all")."""

    def __init__(self, store: Any, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(store.topic_list_version, self._read_all, clock)
        self._store = store

    async def _read_all(self) -> tuple[TopicList, str | None]:
        names, version = await self._store.topic_list_at("all")
        return TopicList(names), version
