"""`GET /v1/watch?topics=a,b,c`: routes as Server-Sent Events — the current route of each topic, then each change.

Events are `event: route`, `data: {"topic", "etag", "route"}` (`route` null: no such topic, e.g. deleted or its
last broker expired), `id: <n>:<tag>,<tag>,...` — a per-stream counter and, in the order of `topics`, the entity
tag of each topic's route as the client last received it. EventSource sends the last id back as `Last-Event-ID`
when it reconnects (to any worker): the stream then sends only the topics whose route differs from those tags,
and the counter goes on from n. So after a reconnect the client holds every topic's current route and nothing
it held already is sent again; changes in between are folded into the latest state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import hdrs, web

from service.core import NameServer, Principal
from service.core.access import Role
from service.core.watch import Seen, Stream
from service.errors import InvalidArgument, NamesrvError
from service.http.handlers import NO_CACHE, NS, client_address, principal, route_body
from service.models import topic_name

MAX_TOPICS = 100  # a stream's id carries a tag per topic: bounded to stay far below the header size limit
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": NO_CACHE, "X-Accel-Buffering": "no"}
KEEPALIVE = b": keep-alive\n\n"
# The fan-out's reads, shared by every stream of a topic: each stream was allowed to read when it opened (the
# credentials a worker accepts do not change while it runs), so the shared read is made as a reader.
READER = Principal("read", via="route stream")


def parse_topics(raw: str | None) -> list[str]:
    names = [t.strip() for t in (raw or "").split(",") if t.strip()]
    if not names:
        raise InvalidArgument("topics: one or more topic names, comma-separated (?topics=a,b)")
    names = list(dict.fromkeys(names))
    if len(names) > MAX_TOPICS:
        raise InvalidArgument(f"topics: at most {MAX_TOPICS} per stream (got {len(names)})")
    for name in names:
        topic_name(name)
    return names


def event_id(seq: int, topics: tuple[str, ...], sent: dict[str, str]) -> bytes:
    return f"{seq}:{','.join(sent.get(t, '').strip(chr(34)) for t in topics)}".encode()


def resume(last_event_id: str | None, topics: tuple[str, ...]) -> tuple[int, dict[str, str]]:
    """(counter, tags the client holds by topic) from a Last-Event-ID; a foreign or mangled one resumes nothing."""
    if not last_event_id:
        return 0, {}
    head, _, tail = last_event_id.partition(":")
    try:
        seq = max(0, int(head))
    except ValueError:
        return 0, {}
    tags = tail.split(",")
    if len(tags) != len(topics):
        return seq, {}
    return seq, {t: f'"{tag}"' for t, tag in zip(topics, tags, strict=True) if tag}


def route_event(topic: str, seen: Seen[bytes | None]) -> bytes:
    """A topic's event without its id: encoded once per change, shared by every stream of the topic."""
    data = b''.join((b'{"topic":', orjson.dumps(topic), b',"etag":', orjson.dumps(seen.tag), b',"route":',
                     seen.payload if seen.payload is not None else b"null", b"}"))
    return b"event: route\ndata: " + data + b"\n\n"


class SseStream(Stream):
    """A route stream's wire format: `id: <n>:<tags>` then the shared event."""

    __slots__ = ()

    def render(self, topic: str, seen: Seen[bytes]) -> bytes:
        return b"id: " + event_id(self.seq, self.topics, self.sent) + b"\n" + seen.payload

    def render_error(self, err: NamesrvError) -> bytes:
        return b"event: error\ndata: " + orjson.dumps(err.to_dict()) + b"\n\n"


def event_reader(ns: NameServer) -> Callable[[str], Awaitable[Seen[bytes]]]:
    """The streams' shared read: a topic's event body (without its id) and the route's tag."""
    async def read(topic: str) -> Seen[bytes]:
        seen = route_body(ns, topic, ns.cached_route(READER, topic) or await ns.route(READER, topic))
        return Seen(route_event(topic, seen), seen.tag)

    return read


async def watch_routes(request: web.Request) -> web.StreamResponse:
    """GET /v1/watch?topics=a,b: the API's stream."""
    ns = request.app[NS]
    who: Principal = principal(request)
    ns.access.require(who, Role.READ)
    return await serve_stream(request, who, parse_topics(request.query.get("topics")))


async def serve_stream(request: web.Request, who: Principal, names: list[str]) -> web.StreamResponse:
    """The route stream of `names` for a caller already allowed to read (the API's, the console's). The stream
    is registered first, written to by the feed's fan-outs once its headers went out, and this handler reads
    each topic once to start it, then only waits for the stream to end."""
    ns = request.app[NS]
    s = ns.base_settings
    feed = ns.routes.feed
    stream = SseStream(names, client_address(request))
    stream.seq, stream.sent = resume(request.headers.get("Last-Event-ID"), stream.topics)
    read = event_reader(ns)
    feed.open_stream(stream, s.watch_max_per_worker, s.watch_max_per_client, read, KEEPALIVE, s.watch_keepalive_s)
    try:
        resp = web.StreamResponse(headers=SSE_HEADERS)
        resp.force_close()  # a stream's connection ends with it (stated up front, so no client reuses it)
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):  # the client went away: nothing to tell it
            await resp.write(b"retry: 1000\n\n")  # EventSource reconnects after 1 s (another worker on SIGTERM)
            stream.attach(request.transport, resp.headers.get(hdrs.TRANSFER_ENCODING) == "chunked")
            for topic in stream.topics:
                if stream.reason:
                    break
                at = feed.changes
                try:
                    seen = await read(topic)
                except NamesrvError as err:  # e.g. Redis unreachable: say why, end; the client resumes later
                    stream.fail(err)
                    break
                stream.offer(topic, seen, at)
            await stream.ended.wait()
            if stream.reason == "shutdown":
                await resp.write(b": this worker is shutting down; reconnect with Last-Event-ID\n\n")
            if stream.reason in ("shutdown", "error"):
                await resp.write_eof()
        return resp
    finally:
        feed.close(stream)
