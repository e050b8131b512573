"""HTTP handlers of API v1: parse the request, call the core, encode the reply (standard JSON, string keys)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import hdrs, web

from service.core import ANONYMOUS, NameServer, Principal
from service.core.route_cache import RouteEntry, content_tag
from service.core.watch import Seen, long_poll
from service.errors import InvalidArgument, TopicNotExist, Unauthorized
from service.http.errors import BodyTimeout
from service.models import ClusterInfo, TopicList, TopicRouteData, obj

NS = web.AppKey("nameserver", NameServer)
JSON = "application/json"
ROUTE_VARIANT = "http"  # the route cache keeps this door's encoding under this name
NO_CACHE = "no-cache"  # caches may keep a route but must revalidate it (If-None-Match) before every use
MAX_WAIT_S = 60.0


def reply(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS), status=status, content_type=JSON)


def encode_route(route: TopicRouteData) -> bytes:
    return orjson.dumps(route.to_dict(), option=orjson.OPT_NON_STR_KEYS)


def principal(request: web.Request) -> Principal:
    """The caller, from `Authorization: Bearer <token>`; the core decides what it may do."""
    access = request.app[NS].access
    header = request.headers.get("Authorization")
    if header is None or access.open_mode:
        return ANONYMOUS
    scheme, _, value = header.strip().partition(" ")
    if not value.strip() and scheme.lower() in ("", "bearer"):
        return ANONYMOUS  # an empty credential is none: the core refuses it only where one is needed
    if scheme.lower() != "bearer":
        raise Unauthorized("Authorization must be 'Bearer <token>'")
    who = access.identify_token(value.strip())
    if who is None:
        raise Unauthorized("unknown token")
    return who


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or InvalidArgument. Module-level: the core may run it in a parser
    process for a large registration."""
    if not raw:
        raise InvalidArgument("body: a JSON object is required")
    try:
        return obj(orjson.loads(raw), "body")
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"body: invalid JSON ({exc})") from None


async def read_body(request: web.Request) -> bytes:
    """The request body, within http_read_timeout_s (a slow body is refused, not kept open)."""
    try:
        async with asyncio.timeout(request.app[NS].base_settings.http_read_timeout_s):
            return await request.read()
    except TimeoutError:
        raise BodyTimeout(f"the request body did not arrive within "
                          f"{request.app[NS].base_settings.http_read_timeout_s:g} s") from None


async def read_json(request: web.Request) -> Any:
    return json_object(await read_body(request))


# ------------------------------------------------------------------ brokers

async def register_broker(request: web.Request) -> web.Response:
    who = principal(request)
    res = await request.app[NS].register_broker(who, await read_body(request), decode=json_object, door_key=b"http")
    return reply(res.to_dict())


async def heartbeat(request: web.Request) -> web.Response:
    who = principal(request)
    res = await request.app[NS].heartbeat(who, obj(await read_json(request), "body"))
    return reply(res.to_dict())


async def unregister_broker(request: web.Request) -> web.Response:
    who = principal(request)
    return reply({"result": await request.app[NS].unregister_broker(who, obj(await read_json(request), "body"))})


async def live_brokers(request: web.Request) -> web.Response:
    now, brokers = await request.app[NS].live_brokers(principal(request), request.query.get("cluster"))
    return reply({"now": now, "brokers": [b.to_dict(now) for b in brokers]})


# ------------------------------------------------------------------ reads

def tag_matches(header: str, tag: str) -> bool:
    """If-None-Match against one entity tag: `*`, or a list of tags (weak comparison, as RFC 9110 asks)."""
    if header == tag:
        return True
    header = header.strip()
    if header == "*":
        return True
    return any(t.strip().removeprefix("W/") == tag for t in header.split(","))


def not_modified(tag: str) -> web.Response:
    return web.Response(status=304, headers={"ETag": tag, hdrs.CACHE_CONTROL: NO_CACHE})


def tagged(body: bytes, tag: str, if_none_match: str | None) -> web.Response:
    """A 200 with its ETag, or 304 with no body when the client holds that tag."""
    if if_none_match is not None and tag_matches(if_none_match, tag):
        return not_modified(tag)
    resp = web.Response(body=body, content_type=JSON)
    headers = resp.headers
    headers["ETag"] = tag
    headers[hdrs.CACHE_CONTROL] = NO_CACHE
    return resp


def parse_wait(raw: str) -> float:
    """`?wait=30s` (also `30`, `500ms`): seconds, more than 0 and at most MAX_WAIT_S."""
    text = raw.strip().lower()
    scale = 1.0
    if text.endswith("ms"):
        text, scale = text[:-2], 0.001
    elif text.endswith("s"):
        text = text[:-1]
    try:
        seconds = float(text) * scale
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_WAIT_S:  # also NaN
        raise InvalidArgument(f"wait: a duration above 0 and at most {MAX_WAIT_S:g}s, like 30s or 500ms "
                              f"(got {raw!r})")
    return seconds


def route_body(ns: NameServer, topic: str, entry: RouteEntry, zone: str | None = None) -> Seen[bytes | None]:
    """This door's bytes of a route entry (None: no such topic) and their tag."""
    if entry.route is None:
        return Seen(None, entry.tag(ROUTE_VARIANT, b""))
    if zone is None:
        body = entry.encoded.get(ROUTE_VARIANT) or ns.encoded_route(topic, entry, ROUTE_VARIANT, encode_route)
        return Seen(body, entry.tag(ROUTE_VARIANT, body))
    body = ns.encoded_route(topic, entry, ROUTE_VARIANT, encode_route, zone)
    return Seen(body, entry.tag((ROUTE_VARIANT, zone.lower()), body))


def client_address(request: web.Request) -> str:
    return request.remote or "unknown"


async def topic_route(request: web.Request) -> web.Response:
    """The hot path: a cache hit is one dict lookup returning bytes already encoded for this door, and their
    ETag, hashed once per cache entry. `?zoneName=Z&zoneMode=true` filters as RocketMQ's ZoneRouteRPCHook does;
    `?wait=30s` with If-None-Match answers when the route differs from that tag (or 304 at the timeout)."""
    ns = request.app[NS]
    topic = request.match_info["topic"]
    who = ANONYMOUS if ns.access.open_mode else principal(request)
    if "?" in request.raw_path:
        return await _topic_route_query(request, ns, who, topic)
    entry = ns.cached_route(who, topic) or await ns.route(who, topic)
    if entry.route is None:
        raise TopicNotExist(f"No topic route info in name server for the topic: {topic}")
    body = entry.encoded.get(ROUTE_VARIANT) or ns.encoded_route(topic, entry, ROUTE_VARIANT, encode_route)
    return tagged(body, entry.tags.get(ROUTE_VARIANT) or entry.tag(ROUTE_VARIANT, body),
                  request.headers.get(hdrs.IF_NONE_MATCH))


async def _topic_route_query(request: web.Request, ns: NameServer, who: Principal, topic: str) -> web.Response:
    q = request.query
    zone = ns.zone_filter(q.get("zoneMode"), q.get("zoneName"))
    raw_wait = q.get("wait")
    wait = parse_wait(raw_wait) if raw_wait is not None else 0.0
    if_none_match = request.headers.get(hdrs.IF_NONE_MATCH)

    async def read() -> Seen[bytes | None]:
        return route_body(ns, topic, ns.cached_route(who, topic) or await ns.route(who, topic), zone)

    if wait and if_none_match is not None:
        s = ns.base_settings
        feed = ns.routes.feed
        watch = feed.open((topic,), client_address(request), s.watch_max_per_worker, s.watch_max_per_client)
        try:
            seen, _ = await long_poll(feed, watch, read, lambda tag: tag_matches(if_none_match, tag), wait)
        finally:
            feed.close(watch)
    else:
        seen = await read()
    if seen.payload is None:
        if wait and if_none_match is not None and tag_matches(if_none_match, seen.tag):
            return not_modified(seen.tag)
        raise TopicNotExist(f"No topic route info in name server for the topic: {topic}")
    resp = tagged(seen.payload, seen.tag, if_none_match)
    if ns.routes.feed.closing:
        resp.force_close()  # the client's next request goes to a worker that stays
    return resp


async def cluster_info(request: web.Request) -> web.Response:
    body, tag = await request.app[NS].encoded_cluster_info(principal(request), "http", _cluster_info_body)
    return tagged(body, tag, request.headers.get(hdrs.IF_NONE_MATCH))


def _cluster_info_body(info: ClusterInfo) -> tuple[bytes, str]:
    body = orjson.dumps(info.to_dict(), option=orjson.OPT_NON_STR_KEYS)
    return body, content_tag(body)


async def all_topics(request: web.Request) -> web.Response:
    body = await request.app[NS].encoded_all_topics(principal(request), "http", _topic_list_body)
    return web.Response(body=body, content_type=JSON)


def _topic_list_body(topics: TopicList) -> bytes:
    return orjson.dumps(topics.to_dict(), option=orjson.OPT_NON_STR_KEYS)


async def cluster_topics(request: web.Request) -> web.Response:
    ns, cluster = request.app[NS], request.match_info["cluster"]
    return reply((await ns.topic_list(principal(request), "cluster", cluster)).to_dict())


async def system_topics(request: web.Request) -> web.Response:
    return reply((await request.app[NS].topic_list(principal(request), "system")).to_dict())


async def unit_topics(request: web.Request) -> web.Response:
    return reply((await request.app[NS].topic_list(principal(request), "unit")).to_dict())


async def unit_sub_topics(request: web.Request) -> web.Response:
    return reply((await request.app[NS].topic_list(principal(request), "unitsub")).to_dict())


async def unit_sub_ununit_topics(request: web.Request) -> web.Response:
    return reply((await request.app[NS].topic_list(principal(request), "unitsub-ununit")).to_dict())


async def member_group(request: web.Request) -> web.Response:
    m = request.match_info
    group = await request.app[NS].member_group(principal(request), m["cluster"], m["brokerName"])
    return reply(group.to_dict())


# ------------------------------------------------------------------ admin

async def delete_topic(request: web.Request) -> web.Response:
    topic, cluster = request.match_info["topic"], request.query.get("cluster")
    n = await request.app[NS].delete_topic(principal(request), topic, cluster)
    return reply({"topic": topic, "cluster": cluster, "removedQueueDatas": n})


async def put_topic_route(request: web.Request) -> web.Response:
    topic, who = request.match_info["topic"], principal(request)
    n = await request.app[NS].register_topic(who, topic, obj(await read_json(request), "body"))
    return reply({"topic": topic, "queueDatas": n})


async def wipe_write_perm(request: web.Request) -> web.Response:
    n = await request.app[NS].wipe_write_perm(principal(request), request.match_info["brokerName"])
    return reply({"wipeTopicCount": n})


async def add_write_perm(request: web.Request) -> web.Response:
    n = await request.app[NS].add_write_perm(principal(request), request.match_info["brokerName"])
    return reply({"addTopicCount": n})


async def kv_put(request: web.Request) -> web.Response:
    ns, key, who = request.match_info["namespace"], request.match_info["key"], principal(request)
    value = obj(await read_json(request), "body").get("value")
    await request.app[NS].kv_put(who, ns, key, value)
    return reply({"namespace": ns, "key": key, "value": value})


async def kv_get(request: web.Request) -> web.Response:
    m = request.match_info
    return reply({"value": await request.app[NS].kv_get(principal(request), m["namespace"], m["key"])})


async def kv_delete(request: web.Request) -> web.Response:
    m = request.match_info
    return reply({"deleted": await request.app[NS].kv_delete(principal(request), m["namespace"], m["key"])})


async def kv_list(request: web.Request) -> web.Response:
    table = await request.app[NS].kv_list(principal(request), request.match_info["namespace"])
    return reply(table.to_dict())


async def kv_config(request: web.Request) -> web.Response:
    """The whole KV config in the layout of Java's kvConfig.json ({configTable}); ?namespace=N (repeatable): only
    those."""
    table = await request.app[NS].kv_export(principal(request), request.query.getall("namespace", []))
    return reply({"configTable": table})


async def kv_import(request: web.Request) -> web.Response:
    res = await request.app[NS].kv_import(principal(request), await read_body(request), json_object)
    return reply(res.to_dict())


async def kv_namespaces(request: web.Request) -> web.Response:
    return reply({"namespaces": await request.app[NS].kv_namespaces(principal(request))})


async def get_config(request: web.Request) -> web.Response:
    ns = request.app[NS]
    return reply({"config": ns.config_view(principal(request)), "runtime": sorted(ns.runtime_names)})


async def put_config(request: web.Request) -> web.Response:
    who = principal(request)
    ns = request.app[NS]
    changed = await ns.update_config(who, obj(await read_json(request), "body"))
    config = ns.config_view(who)  # GET /v1/config's shape, after the change, with what changed in the same form
    return reply({"config": config, "runtime": sorted(ns.runtime_names),
                  "updated": {name: config[name] for name in changed}})


async def skew_report(request: web.Request) -> web.Response:
    return web.Response(text=await request.app[NS].skew_summary(principal(request)), content_type=JSON)


async def skew_history(request: web.Request) -> web.Response:
    runs = await request.app[NS].skew_history(principal(request), request.query.get("limit"))
    return reply({"runs": runs})


async def skew_trend(request: web.Request) -> web.Response:
    return reply(await request.app[NS].skew_trend(principal(request)))


async def capacity(request: web.Request) -> web.Response:
    return reply(await request.app[NS].capacity(principal(request)))
