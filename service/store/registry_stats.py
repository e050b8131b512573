"""The registry's figures, as a mixin of RouteStore (routes.py): its version, counts, what the capacity report
weighs, and the one clock (Redis TIME)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError

from service.store.calls import bounded
from service.store.script_runner import ScriptRunner


class RegistryStats(ScriptRunner):
    """Reads of registry-wide figures: no script, one bounded command or pipeline each."""

    @bounded()
    async def version(self) -> int:
        return int(await self.redis.get(self.keys.version) or 0)

    @bounded()
    async def stats(self) -> dict[str, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcard(self.keys.live)
            pipe.scard(self.keys.topics)
            pipe.scard(self.keys.brokers)
            pipe.scard(self.keys.clusters)
            live, topics, brokers, clusters = await pipe.execute()
        return {"liveBrokers": live, "topics": topics, "brokerNames": brokers, "clusters": clusters}

    @bounded(bulk=True)
    async def capacity_stats(self) -> dict[str, Any]:
        """What `namesrv admin capacity` weighs against the sizing model: the registry's counts, its (topic, broker)
        entries (the brokers' topic sets, counted in one pipeline: one SCARD a broker name, none of them long) and
        Redis's own INFO memory, cpu and server figures (in Cluster mode, of the registry's node)."""
        counts = await self.stats()
        names = await self.redis.smembers(self.keys.brokers)
        entries = 0
        if names:
            async with self.redis.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.scard(self.keys.broker_topics(name))
                entries = sum(int(n) for n in await pipe.execute())
        node = {"target_nodes": self.redis.get_node_from_key(self.keys.version)} if self.cluster else {}
        info: dict[str, Any] = {}
        for section in ("memory", "cpu", "server"):
            try:
                info.update(await self.redis.info(section, **node))
            except ResponseError:  # the embedded mode's fakeredis has no INFO
                break
        keep = ("used_memory", "used_memory_rss", "used_memory_peak", "maxmemory", "used_cpu_sys", "used_cpu_user",
                "uptime_in_seconds", "redis_version")
        return {**counts, "entries": entries, "redis": {k: info[k] for k in keep if k in info}}

    @bounded()
    async def redis_time_ms(self) -> int:
        """The one clock (DESIGN §2): Redis TIME in ms; in Cluster mode the clock of the registry's node, the one
        its scripts read."""
        if self.cluster:
            sec, usec = await self.redis.execute_command(
                "TIME", target_nodes=self.redis.get_node_from_key(self.keys.version))
        else:
            sec, usec = await self.redis.time()
        return int(sec) * 1000 + int(usec) // 1000
