"""Java's HashMap iteration order, for the lists the Java NameServer fills from hash maps.

A route's `brokerDatas` and `queueDatas` come out of `HashMap`/`HashSet` iteration in RouteInfoManager, and
tools take "the first" of them (mqadmin `topicClusterList` names the cluster of `getBrokerDatas().get(0)`). Listing
them in the same order makes such tools answer as they do against Java. Java breaks ties within a bucket by
insertion order, which a shared registry does not keep; names break those ties here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


@functools.lru_cache(maxsize=1 << 16)
def string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as an unsigned 32-bit value (remembered: the same broker
    names come back in every route read)."""
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h


def table_size(n: int, copied: bool) -> int:
    """The table length of a HashMap holding n keys: grown put by put from 16 (load factor 0.75), or sized once
    by `new HashSet<>(collection)` (max(n / 0.75 + 1, 16), rounded up to a power of two)."""
    if copied:
        want = max(int(n / 0.75) + 1, 16)
        return 1 << (want - 1).bit_length()
    cap = 16
    while n > cap * 0.75:
        cap *= 2
    return cap


def hash_order(items: Iterable[T], key: Callable[[T], str], copied: bool = False) -> list[T]:
    """`items` in the order a Java HashMap keyed by `key(item)` iterates them."""
    items = list(items)
    mask = table_size(len(items), copied) - 1

    def bucket(item: T) -> tuple[int, str]:
        h = string_hash(key(item))
        return ((h ^ (h >> 16)) & mask, key(item))

    return sorted(items, key=bucket)
