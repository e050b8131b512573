"""The controller's request codes on the native door, sent as a 5.x broker and mqadmin send them
(docs/controller-protocol.md §4, §5): a master and two slaves boot, heartbeat, self-elect, report their
SyncStateSet; mqadmin reads it and moves the master, and the new master's set is notified
(NOTIFY_BROKER_ROLE_CHANGED reaches a listening "broker"). With the setting off the codes are not supported."""

from __future__ import annotations

import asyncio
import re

import fakeredis
import orjson
import pytest

from service.remoting import fastjson
from service.remoting.codec import FrameDecoder


class FakeBroker:
    """Listens where a broker would; records the frames the controller sends it."""

    def __init__(self) -> None:
        self.frames: list = []
        self.got = asyncio.Event()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dec = FrameDecoder(1 << 20)
        while data := await reader.read(65536):
            for item in dec.feed(data):
                self.frames.append(item)
                self.got.set()
        writer.close()

    async def told_master(self, broker_id: int, timeout: float = 5) -> None:
        """Until a NOTIFY_BROKER_ROLE_CHANGED naming `broker_id` as master has arrived."""
        async with asyncio.timeout(timeout):
            while True:
                self.got.clear()
                if any(f.ext_fields.get("masterBrokerId") == str(broker_id) for f in self.frames):
                    return
                await self.got.wait()

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()


async def boot(c, bid_expected: int, addr: str) -> None:
    ext = {"clusterName": "C", "brokerName": "b"}
    r = await c.request(1012, ext)
    assert r.code == 0 and r.ext_fields["nextBrokerId"] == str(bid_expected)
    r = await c.request(1013, {**ext, "appliedBrokerId": bid_expected, "registerCheckCode": f"{addr};1"})
    assert r.code == 0, r.remark
    r = await c.request(1003, {**ext, "brokerId": bid_expected, "brokerAddress": addr})
    assert r.code == 0, r.remark
    await heartbeat(c, bid_expected, addr)


async def heartbeat(c, bid: int, addr: str, offset: int = 0) -> None:
    r = await c.request(904, {"clusterName": "C", "brokerName": "b", "brokerAddr": addr, "brokerId": bid,
                              "epoch": 1, "maxOffset": offset, "confirmOffset": offset,
                              "heartbeatTimeoutMills": 60_000, "electionPriority": 1})
    assert (r.code, r.remark) == (0, "Heart beat success")


async def test_a_broker_set_boots_elects_and_is_re_elected_by_admin(make_door):
    door = await make_door(controller="true")
    c = await door.client()
    meta = await c.request(1005)
    assert meta.code == 0 and meta.ext_fields["isLeader"] == "true"
    assert meta.ext_fields["controllerLeaderAddress"] == f"127.0.0.1:{door.port}"
    brokers = {i: FakeBroker() for i in (1, 2, 3)}
    addrs = {i: await b.start() for i, b in brokers.items()}
    try:
        for i in (1, 2, 3):
            await boot(c, i, addrs[i])
        # broker 1 self-elects first (no master yet): it is master at epoch 1
        r = await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})
        assert r.code == 0 and r.ext_fields["masterBrokerId"] == "1" and r.ext_fields["masterEpoch"] == "1"
        assert fastjson.loads(r.body)["brokerMemberGroup"]["brokerAddrs"] == {1: addrs[1], 2: addrs[2],
                                                                              3: addrs[3]}
        # broker 2 self-elects too: the master still exists
        r = await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 2})
        assert r.code == 2011 and r.ext_fields["masterBrokerId"] == "1"
        # the master admits its slaves; a stale report is fenced
        body = fastjson.dumps({"syncStateSet": [1, 2, 3], "syncStateSetEpoch": 1})
        r = await c.request(1001, {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1}, body)
        assert r.code == 0 and r.ext_fields["newSyncStateSetEpoch"] == "2"
        assert fastjson.loads(r.body) == {"syncStateSet": [1, 2, 3], "syncStateSetEpoch": 2}
        r = await c.request(1001, {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1},
                            fastjson.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}))
        assert r.code == 2001
        r = await c.request(1001, {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1},
                            fastjson.dumps({"syncStateSet": [1, 9], "syncStateSetEpoch": 2}))
        assert (r.code, r.remark) == (2003, "Rejecting alter syncStateSet request because the replicas {9} don't exist")
        r = await c.request(1001, {"brokerName": "b", "masterEpoch": 1},
                            fastjson.dumps({"syncStateSet": [2], "syncStateSetEpoch": 2}))
        assert (r.code, r.remark) == (2002, "Rejecting alter syncStateSet request because the current leader is:{1}, "
                                            "not {null}")
        # a slave's periodic replica info
        r = await c.request(1004, {"brokerName": "b"})
        assert r.code == 0 and r.ext_fields["masterAddress"] == addrs[1]
        # mqadmin getSyncStateSet
        r = await c.request(1006, body=fastjson.dumps(["b", "nope"]))
        info = fastjson.loads(r.body)["replicasInfoTable"]
        assert list(info) == ["b"] and [x["brokerId"] for x in info["b"]["inSyncReplicas"]] == [1, 2, 3]
        assert all(x["alive"] for x in info["b"]["inSyncReplicas"])
        # mqadmin electMaster -i 3: designated, alive, in the SyncStateSet: elected, and every live broker told
        r = await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 3, "designateElect": True})
        assert r.code == 0 and r.ext_fields["masterBrokerId"] == "3" and r.ext_fields["masterEpoch"] == "2"
        for b in brokers.values():  # each was told of epoch 1 (broker 1's self-election), then of epoch 2
            async with asyncio.timeout(5):
                while True:
                    b.got.clear()  # before the check, so a frame arriving after it still wakes the wait
                    if [f.ext_fields["masterEpoch"] for f in b.frames] == ["1", "2"]:
                        break
                    await b.got.wait()
            cmd = b.frames[-1]
            assert cmd.code == 1008 and cmd.ext_fields["masterBrokerId"] == "3"
            assert cmd.ext_fields["masterAddress"] == addrs[3]
            assert fastjson.loads(cmd.body) == {"syncStateSet": [3], "syncStateSetEpoch": 3}
        # cleanBrokerMetadata of a set with a master is refused; getControllerConfig answers properties
        r = await c.request(1011, {"clusterName": "C", "brokerName": "b"})
        assert r.code == 2009 and r.remark == "Broker b is still alive, clean up failure"
        r = await c.request(1010)
        assert r.code == 0 and b"enableElectUncleanMaster=false" in r.body
    finally:
        for b in brokers.values():
            await b.stop()


async def test_a_broker_id_taken_by_another_broker_is_refused(make_door):
    door = await make_door(controller="true")
    c = await door.client()
    ext = {"clusterName": "C", "brokerName": "b"}
    assert (await c.request(1013, {**ext, "appliedBrokerId": 2, "registerCheckCode": "a:1;1"})).code == 2014
    assert (await c.request(1013, {**ext, "appliedBrokerId": 1, "registerCheckCode": "a:1;1"})).code == 0
    r = await c.request(1013, {**ext, "appliedBrokerId": 1, "registerCheckCode": "b:1;1"})
    assert (r.code, r.remark) == (2014, "Fail to apply brokerId: 1 in broker-set: b")
    r = await c.request(1003, {**ext, "brokerId": 2, "brokerAddress": "b:1"})
    assert (r.code, r.remark) == (2010, "BrokerId: 2 hasn't been registered in broker-set: b")
    assert {k: r.ext_fields.get(k) for k in ext} == ext  # Java names the set in a refusal too
    r = await c.request(904, {**ext, "brokerAddr": "a:1"})  # no brokerId: the name-server heartbeat, as before
    assert r.code == 0 and r.remark != "Heart beat success"


async def test_answers_match_apaches_controller_where_the_differential_found_them_apart(make_door):
    """Found by tests/differential/test_controller_differential.py: a set without a master has no master fields
    in 1006 (fastjson leaves nulls out), and a master registering from a new address is answered from the state
    before the change (Java applies the address event after building the answer), the next answer has it."""
    door = await make_door(controller="true")
    c = await door.client()
    ext = {"clusterName": "C", "brokerName": "b"}
    assert (await c.request(1013, {**ext, "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1"})).code == 0
    r = await c.request(1006, body=fastjson.dumps(["b"], standard=True))
    info = fastjson.loads(r.body)["replicasInfoTable"]["b"]
    assert "masterAddress" not in info and "masterBrokerId" not in info and info["masterEpoch"] == 0
    await boot(c, 2, "127.0.0.1:2")
    assert (await c.request(1003, {**ext, "brokerId": 1, "brokerAddress": "127.0.0.1:1"})).code == 0
    await heartbeat(c, 1, "127.0.0.1:1")
    assert (await c.request(1002, {**ext, "brokerId": 1})).code == 0
    moved = {**ext, "brokerId": 1, "brokerAddress": "127.0.0.1:9"}
    r = await c.request(1003, moved)
    assert (r.code, r.ext_fields["masterAddress"]) == (0, "127.0.0.1:1")
    r = await c.request(1003, moved)
    assert (r.code, r.ext_fields["masterAddress"]) == (0, "127.0.0.1:9")


async def test_metadata_names_the_advertised_address_when_there_is_one(make_door):
    door = await make_door(controller="true", advertised_addrs="nsrv.example.svc:9876;other:9876")
    c = await door.client()
    r = await c.request(1005)
    assert r.ext_fields["controllerLeaderAddress"] == "nsrv.example.svc:9876"


async def test_controller_codes_are_not_supported_when_off(door):
    c = await door.client()
    r = await c.request(1005)
    assert (r.code, r.remark) == (3, " request type 1005 not supported")
    r = await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})
    assert r.code == 3


async def test_master_loss_is_re_elected_once_by_the_workers_scans_and_announced(make_door):
    """kill -9 of the master: its heartbeats stop (here: a 1 ms timeout), the slave's go on. Two workers tick
    their controller scan: one elects the slave, the other finds nothing to do; the slave is told."""
    from service.core.controller import controller_of, controller_scan

    door = await make_door(controller="true")
    c = await door.client()
    slave = FakeBroker()
    slave_addr = await slave.start()
    try:
        await boot(c, 1, "127.0.0.1:1")
        await boot(c, 2, slave_addr)
        assert (await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})).code == 0
        body = fastjson.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1})
        assert (await c.request(1001, {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1}, body)).code == 0
        await c.request(904, {"clusterName": "C", "brokerName": "b", "brokerAddr": "127.0.0.1:1", "brokerId": 1,
                              "heartbeatTimeoutMills": 1})  # the master's last heartbeat, and it is gone
        async with asyncio.timeout(5):  # until the Redis clock passes that 1 ms deadline
            while 1 in (await controller_of(door.ns).store.group("b")).alive:
                await asyncio.sleep(0)
        first, second = await asyncio.gather(controller_scan(door.ns), controller_scan(door.ns))
        elected = [a for a in first + second if a.code == 0]
        assert len(elected) == 1 and elected[0].header["masterBrokerId"] == 2
        assert elected[0].header["masterEpoch"] == 2
        r = await c.request(1004, {"brokerName": "b"})
        assert r.ext_fields["masterBrokerId"] == "2" and r.ext_fields["masterEpoch"] == "2"
        await slave.told_master(2)
        assert await controller_scan(door.ns) == []  # nothing left to do
        text = door.ns.metrics.render().decode()
        metrics = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
                   if line.startswith("namesrv_controller_elections_total{")}
        assert metrics.get('namesrv_controller_elections_total{result="new_master_elected",trigger="controller"}') \
            == 1.0, metrics
    finally:
        await slave.stop()


async def test_update_controller_config_switches_unclean_election_for_every_worker(make_door):
    """mqadmin updateControllerConfig enableElectUncleanMaster=true: a set whose SyncStateSet has no live member
    can then elect an out-of-sync replica; the blacklist is refused."""
    from service.core.controller import controller_of

    door = await make_door(controller="true")
    c = await door.client()
    await boot(c, 1, "127.0.0.1:1")
    await boot(c, 2, "127.0.0.1:2")
    assert (await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})).code == 0
    await c.request(904, {"clusterName": "C", "brokerName": "b", "brokerAddr": "127.0.0.1:1", "brokerId": 1,
                          "heartbeatTimeoutMills": 1})  # the master (the SyncStateSet's only member) is gone
    designate = {"clusterName": "C", "brokerName": "b", "brokerId": 2, "designateElect": True}
    async with asyncio.timeout(5):  # until the Redis clock passes that 1 ms deadline
        while 1 in (await controller_of(door.ns).store.group("b")).alive:
            await asyncio.sleep(0)
    r = await c.request(1002, designate)
    assert r.code == 2012  # broker 2 is not in the SyncStateSet: no unclean election by default
    r = await c.request(1009, body=b"configStorePath=/tmp/x\n")
    assert (r.code, r.remark) == (16, "Can not update config in black list.")
    assert (await c.request(1009, body=b"enableElectUncleanMaster=true\nscanNotActiveBrokerInterval=1\n")).code == 0
    assert b"enableElectUncleanMaster=true" in (await c.request(1010)).body
    r = await c.request(1002, designate)
    assert r.code == 0 and r.ext_fields["masterBrokerId"] == "2" and r.ext_fields["masterEpoch"] == "2"


@pytest.mark.parametrize("outage_s", [0, 1.5], ids=["redis-up", "redis-failing-over"])
async def test_the_masters_connection_closing_re_elects_at_once(make_door, outage_s):
    """kill -9 of the master closes its connection: the worker re-elects now (Java's BrokerHousekeepingService),
    not after the heartbeat timeout (60 s here; no expiry scans run), and tells the slave. When Redis is
    unreachable at that moment (a failover), the worker keeps trying and elects once it is back."""
    from service.core.controller import controller_of

    redis = fakeredis.FakeServer()
    door = await make_door(redis_server=redis, controller="true")
    admin = await door.client()
    master = await door.client()  # the master broker's own connection
    slave = FakeBroker()
    slave_addr = await slave.start()
    try:
        await boot(admin, 1, "127.0.0.1:1")
        await boot(admin, 2, slave_addr)
        await heartbeat(master, 1, "127.0.0.1:1")
        assert (await admin.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})).code == 0
        body = fastjson.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1})
        assert (await admin.request(1001, {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1}, body)).code == 0
        await heartbeat(admin, 2, slave_addr)  # the slave's latest heartbeat is on another connection
        redis.connected = not outage_s
        await master.close()
        await asyncio.sleep(outage_s)
        redis.connected = True
        async with asyncio.timeout(5):
            while (g := await controller_of(door.ns).store.group("b")).master != 2:
                await asyncio.sleep(0.01)
        assert g.master_epoch == 2 and g.sync_state_set == frozenset({2}) and g.alive == frozenset({2})
        await slave.told_master(2)
    finally:
        await slave.stop()


async def test_operators_see_each_broker_set_over_http_and_namesrv_admin(make_door, capsys):
    """GET /v1/controller/broker-sets and `namesrv admin controller` (which reads it) show the master, epochs,
    SyncStateSet and replicas with their liveness."""
    from service.admin.commands import run
    from service.cli import build_parser

    door = await make_door(controller="true")
    c = await door.client()
    await boot(c, 1, "127.0.0.1:1")
    await boot(c, 2, "127.0.0.1:2")
    assert (await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})).code == 0
    resp = await door.http.get("/v1/controller/broker-sets")
    data = await resp.json()
    assert resp.status == 200 and data["enabled"] is True
    (g,) = data["brokerSets"]
    assert (g["brokerName"], g["clusterName"], g["masterBrokerId"], g["masterAddress"], g["masterEpoch"],
            g["syncStateSet"], g["syncStateSetEpoch"]) == ("b", "C", 1, "127.0.0.1:1", 1, [1], 1)
    assert g["replicas"] == [{"brokerId": 1, "brokerAddress": "127.0.0.1:1", "alive": True, "inSync": True},
                             {"brokerId": 2, "brokerAddress": "127.0.0.1:2", "alive": True, "inSync": False}]
    url = str(door.http.make_url("/")).rstrip("/")
    for extra in (["--json"], []):
        args = build_parser().parse_args(["admin", "--server", url, *extra, "controller"])
        assert await asyncio.to_thread(run, args, {}) == 0
        printed = capsys.readouterr().out
        if extra:
            assert orjson.loads(printed) == data
        else:  # a table as the other commands print (it was lowercase text without the rule line: issue 39)
            rows = [re.split(r"\s{2,}", line.strip()) for line in printed.splitlines() if "───" not in line]
            assert rows == [["BROKER SET", "CLUSTER", "MASTER", "MASTER EPOCH", "SYNCSTATESET", "SYNCSTATESET EPOCH",
                             "REPLICAS (* ALIVE)"], ["b", "C", "1 127.0.0.1:1", "1", "1", "1", "1* 2*"]], printed
    args = build_parser().parse_args(["admin", "--server", url, "controller", "--broker", "nope"])
    assert await asyncio.to_thread(run, args, {}) == 1


async def test_the_console_shows_each_broker_set(make_door):
    door = await make_door(controller="true")
    c = await door.client()
    await boot(c, 1, "127.0.0.1:1")
    assert (await c.request(1002, {"clusterName": "C", "brokerName": "b", "brokerId": 1})).code == 0
    page = await (await door.http.get("/console/controller")).text()
    assert 'id="broker-sets"' in page and "127.0.0.1:1" in page and ">Controller</a>" in page
    row = page.split('id="broker-sets"', 1)[1]
    assert '<td class="name">b</td><td>C</td>' in row and '<td class="num">1</td>' in row
    off = await make_door()
    assert ">Controller</a>" not in await (await off.http.get("/console/")).text()
