"""Ceilings for the HTTP benchmarks: the same aiohttp + uvloop stack with no NameServer logic.

`--mode route`: returns pre-encoded route bytes for /v1/topics/{topic}/route (what a perfect cache would do);
`--mode evalsha`: /v1/brokers/heartbeat runs one no-op EVALSHA on Redis, then answers a small JSON.
"""

from __future__ import annotations

import argparse
import asyncio

import orjson
import redis.asyncio as aioredis
from aiohttp import web


def route_app(bodies: dict[str, bytes]) -> web.Application:
    async def route(request: web.Request) -> web.Response:
        body = bodies.get(request.match_info["topic"])
        if body is None:
            return web.Response(body=b'{"code":"TOPIC_NOT_EXIST"}', status=404, content_type="application/json")
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/topics/{topic}/route", route)
    return app


def evalsha_app(redis_url: str) -> web.Application:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    state: dict[str, str] = {}

    async def heartbeat(request: web.Request) -> web.Response:
        await request.read()
        await client.evalsha(state["sha"], 0)
        return web.Response(body=b'{"changed":false}', content_type="application/json")

    async def startup(app: web.Application) -> None:
        state["sha"] = await client.script_load("return 1")

    app = web.Application()
    app.on_startup.append(startup)
    app.router.add_post("/v1/brokers/heartbeat", heartbeat)
    return app


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["route", "evalsha"], required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bodies", help="JSON file topic -> route JSON (route mode)")
    p.add_argument("--redis-url")
    args = p.parse_args()
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    if args.mode == "route":
        with open(args.bodies, "rb") as fh:
            bodies = {t: orjson.dumps(v) for t, v in orjson.loads(fh.read()).items()}
        app = route_app(bodies)
    else:
        app = evalsha_app(args.redis_url)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
