"""Structural invariants of the Redis route tables, read straight from the keys (no store code involved).

- every brokerName in queue data exists; each broker in exactly one cluster, matching its data;
- no empty cluster, topic or broker; live entries <=> broker addresses; deadlines <=> live;
- the reverse index brokerName -> topics equals the forward table, but for the fields a removal still being swept
  left (a topic not in its broker's reverse index: readers never see it), each of which its sweep still holds;
- topic generations only for existing brokers; a live info that records a digest records what it was applied
  under too;
- while the brokers' lines are current (their "#" is the civer), each says what its broker's data and addresses
  say.
"""

from __future__ import annotations

from collections import defaultdict

from service.store.keys import Keys


async def read_tables(redis, prefix: str) -> dict:
    k = Keys(prefix)
    topics = set(await redis.smembers(k.topics))
    brokers = set(await redis.smembers(k.brokers))
    clusters = set(await redis.smembers(k.clusters))
    found_t, found_b, found_ba, found_bt, found_c, found_l = set(), set(), set(), set(), set(), set()
    async for key in redis.scan_iter(match=k.base + "*", count=1000):
        rest = key[len(k.base):]
        kind, _, name = rest.partition(":")
        {"t": found_t, "b": found_b, "ba": found_ba, "bt": found_bt, "c": found_c, "l": found_l}.get(
            kind, set()).add(name)
    forward = {t: await redis.hgetall(k.topic(t)) for t in found_t}
    data = {b: await redis.hgetall(k.broker_data(b)) for b in found_b}
    addrs = {b: await redis.hgetall(k.broker_addrs(b)) for b in found_ba}
    reverse = {b: set(await redis.smembers(k.broker_topics(b))) for b in found_bt}
    members = {c: set(await redis.smembers(k.cluster(c))) for c in found_c}
    live = dict(await redis.zrange(k.live, 0, -1, withscores=True))
    deadlines = dict(await redis.zrange(k.deadlines, 0, -1, withscores=True))
    gens = await redis.hgetall(k.topic_gens)
    digests = {m: await redis.hmget(k.base + "l:" + m, "rd", "tk") for m in found_l}
    lines = await redis.hgetall(k.broker_lines)
    civer = await redis.get(k.cluster_info_version)
    pending: dict[str, set[str]] = defaultdict(set)  # brokerName -> topics its "r" sweeps have yet to clear
    for sweep_id, job in (await redis.hgetall(k.sweeps)).items():
        kind, name, *_ = job.split("\t") if sweep_id != "#" else ("#", "")
        if kind == "r":
            pending[name] |= set(await redis.smembers(k.sweep_topics(sweep_id)))
    return dict(pending=pending, topics=topics, brokers=brokers, clusters=clusters, forward=forward, data=data,
                addrs=addrs, reverse=reverse, members=members, live=live, deadlines=deadlines, live_info=found_l,
                gens=gens, digests=digests, lines=lines, civer=civer)


async def check_invariants(redis, prefix: str) -> None:
    t = await read_tables(redis, prefix)
    assert t["topics"] == set(t["forward"]), "topic set != topic hashes"
    assert all(t["forward"].values()), "empty topic"
    for topic, qds in t["forward"].items():  # fields left by a removal being swept: only those its sweep holds
        for name in [n for n in qds if topic not in t["reverse"].get(n, ())]:
            assert topic in t["pending"][name], f"queue data of {name} for {topic}: neither indexed nor swept"
            del qds[name]
    t["forward"] = {topic: qds for topic, qds in t["forward"].items() if qds}
    for topic, qds in t["forward"].items():
        for name in qds:
            assert name in t["brokers"], f"topic {topic} names unknown broker {name}"
    assert t["brokers"] == set(t["data"]) == set(t["addrs"]), "broker set != broker data != addresses"
    assert all(t["addrs"].values()), "broker without addresses"
    # each broker in exactly one cluster, the one its data names
    owners: dict[str, list[str]] = defaultdict(list)
    for c, names in t["members"].items():
        for n in names:
            owners[n].append(c)
    for name, d in t["data"].items():
        assert owners[name] == [d["cluster"]], f"broker {name} in clusters {owners[name]}, data says {d}"
    assert set(owners) == t["brokers"], "cluster member that is not a broker"
    assert t["clusters"] == set(t["members"]), "cluster set != non-empty cluster sets"
    # reverse index == forward table
    rev: dict[str, set[str]] = defaultdict(set)
    for topic, qds in t["forward"].items():
        for name in qds:
            rev[name].add(topic)
    assert {n: s for n, s in t["reverse"].items()} == dict(rev), "reverse index != forward table"
    # live entries <=> addresses (one broker per address per cluster)
    addr_members = []
    for name, ids in t["addrs"].items():
        for addr in ids.values():
            addr_members.append(f"{t['data'][name]['cluster']}|{addr}")
    assert len(addr_members) == len(set(addr_members)), "an address serves two ids or two brokers in a cluster"
    assert set(addr_members) == set(t["live"]), "live entries != broker addresses"
    assert set(t["live"]) == set(t["deadlines"]) == t["live_info"], "live != deadlines != live info"
    assert set(t["gens"]) - {"#"} <= t["brokers"], "topic generation of a broker that is gone"
    assert all((rd is None) == (tk is None) for rd, tk in t["digests"].values()), "digest without its token"
    # brokers' lines, while current (at civer), as getRoutes would build each (its addresses in any order)
    if t["lines"].get("#") == t["civer"]:
        for name, line in t["lines"].items():
            if name == "#":
                continue
            assert name in t["brokers"], f"line of broker {name}, which is gone"
            b, cluster, eam, zone, addrs = line.split("\t")
            d = t["data"][name]
            flat = addrs.split(",") if addrs else []
            assert (b, cluster, eam, zone) == (name, d["cluster"], d.get("enableActingMaster", "0"),
                                               d.get("zoneName", "")), f"line {line!r} != data {d}"
            assert dict(zip(flat[0::2], flat[1::2], strict=True)) == t["addrs"][name], f"line {line!r} != addresses"


def jsonable(obj):
    """A model as the HTTP door serves it: to_dict() through standard JSON (int keys become strings)."""
    import orjson

    return orjson.loads(orjson.dumps(obj.to_dict(), option=orjson.OPT_NON_STR_KEYS))
