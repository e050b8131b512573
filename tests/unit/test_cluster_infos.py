"""The worker's copy of the cluster info (service/core/cluster_infos.py): which reads share a clusterInfo call and
which must not. The store's side — every change renews {P}:civer, clusterInfo returns it — is checked by the model
test (tests/lua/test_model.py) and across two workers by tests/integration/test_cluster_info_copies.py."""

from __future__ import annotations

import asyncio

import pytest

from service.core.cluster_infos import ClusterInfos
from service.models import ClusterInfo


class Registry:
    """A version and the cluster info at it; each clusterInfo call waits until the test releases it."""

    def __init__(self) -> None:
        self.version: str | None = "1"
        self.calls: list[asyncio.Future[None]] = []
        self.fail: Exception | None = None

    def info(self, version: str | None) -> ClusterInfo:
        return ClusterInfo({}, {"C": [f"at-{version}"]})

    async def read_version(self) -> str | None:
        return self.version

    async def read_at(self) -> tuple[ClusterInfo, str | None, str]:
        version = self.version  # the script reads tables and version together, when it runs
        gate = asyncio.get_running_loop().create_future()
        self.calls.append(gate)
        await gate
        if self.fail is not None:
            raise self.fail
        return self.info(version), version, "steps"


def shown(copy) -> str:
    return copy.value.cluster_addr_table["C"][0]


async def until(cond) -> None:
    async with asyncio.timeout(5):
        while not cond():
            await asyncio.sleep(0)


async def released(infos: ClusterInfos, reg: Registry):
    """A read whose clusterInfo call (if it makes one) the test lets run."""
    task = asyncio.ensure_future(infos.get())
    async with asyncio.timeout(5):
        while not task.done():
            for gate in reg.calls:
                if not gate.done():
                    gate.set_result(None)
            await asyncio.sleep(0)
    return task.result()


async def test_the_copy_answers_while_the_version_holds_and_not_after():
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    assert shown(await released(infos, reg)) == "at-1"
    assert shown(await infos.get()) == "at-1" and (infos.hits, infos.calls) == (1, 1)
    reg.version = "2"
    assert shown(await released(infos, reg)) == "at-2" and infos.calls == 2 and infos.reads["steps"] == 2


async def test_concurrent_misses_share_one_call():
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    reads = [asyncio.ensure_future(infos.get()) for _ in range(20)]
    await until(lambda: reg.calls)
    await asyncio.sleep(0)
    reg.calls[0].set_result(None)
    assert {shown(c) for c in await asyncio.gather(*reads)} == {"at-1"}
    assert infos.calls == 1 and len(reg.calls) == 1


async def test_a_read_does_not_answer_a_call_begun_before_a_change_it_saw():
    """A read that begins after a change was acknowledged (its GET sees version 2) never gets a call that began
    before it and read version 1; readers that arrive meanwhile share one later call."""
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    early = asyncio.ensure_future(infos.get())
    await until(lambda: reg.calls)
    reg.version = "2"  # acknowledged now; the call under way read version 1
    late = [asyncio.ensure_future(infos.get()) for _ in range(5)]
    await asyncio.sleep(0)
    reg.calls[0].set_result(None)
    assert shown(await early) == "at-1"
    await until(lambda: len(reg.calls) == 2)
    reg.calls[1].set_result(None)
    assert {shown(c) for c in await asyncio.gather(*late)} == {"at-2"}
    assert infos.calls == 2


async def test_a_call_of_the_version_a_read_saw_answers_it():
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    early = asyncio.ensure_future(infos.get())
    await until(lambda: reg.calls)
    late = asyncio.ensure_future(infos.get())  # sees version 1 too: the call under way is at its version
    await asyncio.sleep(0)
    reg.calls[0].set_result(None)
    assert shown(await early) == shown(await late) == "at-1" and infos.calls == 1


async def test_no_version_never_reuses_and_old_copies_are_dropped():
    reg = Registry()
    now = [0.0]
    infos = ClusterInfos(reg.read_version, reg.read_at, clock=lambda: now[0])

    async def read() -> str:
        return shown(await released(infos, reg))

    reg.version = None  # never renewed (an empty registry, or one only older workers wrote)
    await read()
    await read()
    assert infos.calls == 2
    reg.version = "7"
    await read()
    now[0] = ClusterInfos.MAX_AGE_S - 1
    await read()
    assert infos.calls == 3
    now[0] = ClusterInfos.MAX_AGE_S + 1  # a copy this old is read again, whatever the version says
    await read()
    assert infos.calls == 4


async def test_a_failed_call_fails_its_readers_and_the_next_read_tries_again():
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    reg.fail = ConnectionError("Redis went away")
    reads = [asyncio.ensure_future(infos.get()) for _ in range(3)]
    await until(lambda: reg.calls)
    reg.calls[0].set_result(None)
    for r in reads:
        with pytest.raises(ConnectionError):
            await r
    reg.fail = None
    assert shown(await released(infos, reg)) == "at-1"


async def test_a_cancelled_reader_does_not_cancel_the_shared_call():
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    gone, stays = asyncio.ensure_future(infos.get()), asyncio.ensure_future(infos.get())
    await until(lambda: reg.calls)
    gone.cancel()
    await asyncio.sleep(0)
    reg.calls[0].set_result(None)
    assert shown(await stays) == "at-1"


async def test_each_door_encodes_a_copy_once():
    reg = Registry()
    infos = ClusterInfos(reg.read_version, reg.read_at)
    copy = await released(infos, reg)
    made: list[str] = []

    def encode(door: str):
        return lambda info: made.append(door) or f"{door}:{shown(copy)}".encode()

    assert copy.encoding("remoting", encode("remoting")) == b"remoting:at-1"
    assert (await infos.get()).encoding("remoting", encode("remoting")) == b"remoting:at-1"
    assert copy.encoding("http", encode("http")) == b"http:at-1"
    assert made == ["remoting", "http"]
