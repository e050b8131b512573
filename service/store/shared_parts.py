"""Route reads' broker and queue data, one object per distinct value in this worker (SharedParts), and the
decoding of a script's broker data."""

from __future__ import annotations

from typing import Any

from service.models import BrokerData, QueueData
from service.store.script_runner import _pairs


def _broker_data(name: str, cluster: str, eam: str, zone: str, addr_flat: list[str]) -> BrokerData:
    return BrokerData(
        cluster=cluster,
        broker_name=name,
        broker_addrs={int(i): a for i, a in _pairs(addr_flat)},
        enable_acting_master=eam == "1",
        zone_name=zone or None,
    )


class SharedParts:
    """The broker and queue data of route reads, one object per distinct value in this worker: every topic of a
    cluster names the same brokers, so reading a cluster's routes built the same objects again and again, and a
    route cache holding 10 000 routes of 100 brokers held 1.8 M objects, which the garbage collector walked for up
    to a second at a time (benchmarks/README.md, "A fleet's cold start"). Both are immutable (frozen; nothing
    changes a BrokerData's addresses); forgotten all at once past MAX distinct values."""

    MAX = 100_000

    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], QueueData] = {}
        self._brokers: dict[tuple[Any, ...], BrokerData] = {}
        self._lines: dict[str, BrokerData] = {}

    def queue_data(self, name: str, enc: str) -> QueueData:
        key = (name, enc)
        qd = self._queues.get(key)
        if qd is None:
            if len(self._queues) >= self.MAX:
                self._queues.clear()
            qd = self._queues[key] = QueueData.decode(name, enc)
        return qd

    def broker_line(self, line: str) -> BrokerData:
        """A broker as getRoutes sends it: "name\tcluster\team\tzone\tid,addr,..." (lua/getRoutes-2.lua), the line
        itself the key (a cluster's brokers come again in every call that reads its routes)."""
        bd = self._lines.get(line)
        if bd is None:
            if len(self._lines) >= self.MAX:
                self._lines.clear()
            name, cluster, eam, zone, addrs = line.split("\t")
            bd = self._lines[line] = self.broker_data(name, cluster, eam, zone, addrs.split(",") if addrs else [])
        return bd

    def broker_data(self, name: str, cluster: str, eam: str, zone: str, addr_flat: list[str]) -> BrokerData:
        key = (name, cluster, eam, zone, *addr_flat)
        bd = self._brokers.get(key)
        if bd is None:
            if len(self._brokers) >= self.MAX:
                self._brokers.clear()
            bd = self._brokers[key] = _broker_data(name, cluster, eam, zone, addr_flat)
        return bd
