"""Ceilings for the benchmarks: the same stacks (aiohttp / asyncio on uvloop) with no NameServer logic.

`--mode route`: returns pre-encoded route bytes for /v1/topics/{topic}/route (what a perfect cache would do);
`--mode route-unrouted`: the same handler, called by aiohttp's server before its router (what the router costs);
`--mode evalsha`: /v1/brokers/heartbeat runs one no-op EVALSHA on Redis, then answers a small JSON;
`--mode remoting`: a bare asyncio Protocol that splits RocketMQ frames and answers each with one fixed,
pre-encoded route reply frame.
"""

from __future__ import annotations

import argparse
import asyncio
import struct

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


async def serve_unrouted(app: web.Application, bodies: dict[str, bytes], port: int) -> None:
    """The route handler's work, called by aiohttp's Server for every GET of a route, the app's router bypassed."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    through_router = runner.server.request_handler

    async def dispatch(request: web.BaseRequest) -> web.StreamResponse:
        path = request.raw_path
        if request.method == "GET" and path.startswith("/v1/topics/") and path.endswith("/route"):
            body = bodies.get(path[11:-6])
            if body is not None:
                return web.Response(body=body, content_type="application/json")
        return await through_router(request)

    runner.server.request_handler = dispatch
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


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


_LENGTH = struct.Struct(">i")


class FixedFrame(asyncio.Protocol):
    """Answer every complete remoting frame with the same bytes: framing, and nothing else."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        unpack = _LENGTH.unpack_from
        count = 0
        while n - pos >= 4:
            (total,) = unpack(buf, pos)
            if n - pos < 4 + total:
                break
            count += 1
            pos += 4 + total
        self.buf = buf[pos:] if pos < n else b""
        if count:
            self.transport.write(self.reply * count)  # type: ignore[attr-defined]


def remoting_reply(route_body: bytes) -> bytes:
    header = b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}'
    return (4 + len(header) + len(route_body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + \
        route_body


async def serve_remoting(port: int, reply: bytes) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FixedFrame(reply), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["route", "route-unrouted", "evalsha", "remoting"], required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bodies", help="JSON file topic -> route JSON (route mode)")
    p.add_argument("--redis-url")
    args = p.parse_args()
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    if args.mode == "remoting":
        with open(args.bodies, "rb") as fh:
            first = next(iter(orjson.loads(fh.read()).values()))
        asyncio.run(serve_remoting(args.port, remoting_reply(orjson.dumps(first))))
        return
    if args.mode in ("route", "route-unrouted"):
        with open(args.bodies, "rb") as fh:
            bodies = {t: orjson.dumps(v) for t, v in orjson.loads(fh.read()).items()}
        app = route_app(bodies)
        if args.mode == "route-unrouted":
            asyncio.run(serve_unrouted(app, bodies, args.port))
            return
    else:
        app = evalsha_app(args.redis_url)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
