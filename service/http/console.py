"""The read-only web console at /console/: pages rendered on the server from the core's reads, the way the API
handlers call it, through the same guard (errors, request ids, metrics).

Every worker serves it (NAMESRV_CONSOLE=false turns it off). Templates are Jinja2 with autoescaping on, so every
name, key and value is escaped; assets ship in the package and a Content-Security-Policy allows only them (no
inline script or style). When a read token is set, a login form exchanges any token that may read for a session
cookie (HttpOnly, SameSite=Strict, path /console/): the cookie holds an expiry and an HMAC keyed by the
configured tokens, never the token itself, so every worker can check it and rotating a token ends every session.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from functools import cache
from importlib.resources import files
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
import orjson
from aiohttp import web

from service import __version__, display
from service.core import ANONYMOUS, NameServer, Principal, Role
from service.errors import Disabled, Forbidden, NamesrvError, QueryNotFound, ReportNotFound, TopicNotExist, Unauthorized
from service.http import console_charts as charts
from service.http import limits
from service.http.errors import http_status
from service.http.guard import guarded
from service.http.handlers import NS, principal, route_body
from service.metrics import RequestStats
from service.models import TopicRouteData, topic_name

PREFIX = "/console"
COOKIE = "namesrv_console"
SESSION_S = 8 * 3600
PAGE_SIZE = 200  # topics per page of the topic list (each row reads its route, through the route cache)
KV_NAMESPACES_COUNTED = 200  # the KV page counts keys of this many namespaces (one call each)
HISTORY_RUNS = 100  # skew runs the history chart and table show (the job keeps NAMESRV_SKEW_HISTORY, 48)
SESSION = Principal("read", via="console-session")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # not no-referrer: Chromium then sends `Origin: null` on the login post
    "Cache-Control": "no-store",
}
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
Page = Callable[[web.Request, NameServer, Principal], Awaitable[web.StreamResponse]]


# ------------------------------------------------------------------ templates and assets (package data)

@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("service.http", "console_templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(age=display.age, perm=display.perm, role=display.role, when=display.when,
                       share=display.share, number=display.number, data_version=display.data_version,
                       kind=display.topic_kind, seg=segment)
    env.globals.update(static=static_url, version=__version__, prefix=PREFIX)
    return env


@cache
def assets() -> dict[str, tuple[bytes, str, str]]:
    """name -> (content, content type, short digest) of every file in console_static/."""
    out = {}
    for f in files("service.http").joinpath("console_static").iterdir():
        suffix = "." + f.name.rsplit(".", 1)[-1]
        if f.is_file() and suffix in STATIC_TYPES:
            data = f.read_bytes()
            out[f.name] = (data, STATIC_TYPES[suffix], hashlib.sha256(data).hexdigest()[:12])
    return out


def static_url(name: str) -> str:
    return f"{PREFIX}/static/{name}?v={assets()[name][2]}"


def segment(value: str) -> str:
    """A name as one URL path segment: `%RETRY%g` -> `%25RETRY%25g`, `a/b` -> `a%2Fb`."""
    return quote(value, safe="")


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    ns = request.app[NS]
    context.setdefault("section", "")
    context.setdefault("controller", ns.settings.controller)
    html = environment().get_template(template).render(
        session=COOKIE in request.cookies and ns.access.reads_protected, **context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


# ------------------------------------------------------------------ who is asking

def _session_key(ns: NameServer) -> bytes:
    """Derived from every configured token: any worker can check a session, rotating a token ends them all."""
    s = ns.base_settings
    return hashlib.sha256(b"\0".join(t.encode() for t in ("namesrv-console-session", s.read_token, s.admin_token,
                                                           s.broker_tokens))).digest()


def _sign(ns: NameServer, expires: int) -> str:
    mac = hmac.new(_session_key(ns), f"read|{expires}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def new_session(ns: NameServer, now: float | None = None) -> str:
    expires = int(now if now is not None else time.time()) + SESSION_S
    return f"{expires}.{_sign(ns, expires)}"


def session_valid(ns: NameServer, value: str, now: float | None = None) -> bool:
    expires, _, mac = value.partition(".")
    if not expires.isdigit() or int(expires) < (now if now is not None else time.time()):
        return False
    return hmac.compare_digest(mac.encode(), _sign(ns, int(expires)).encode())


def console_principal(request: web.Request) -> Principal:
    """A bearer token (scripts, curl) as on the API, else a valid session cookie (a read principal), else
    anonymous; the core decides whether that may read."""
    if "Authorization" in request.headers:
        return principal(request)
    value = request.cookies.get(COOKIE)
    if value and session_valid(request.app[NS], value):
        return SESSION
    return ANONYMOUS


def _same_origin(request: web.Request) -> bool:
    """A form post must come from this site: the Origin header, when the browser sends one, names this host."""
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc == request.host


def _next(value: str | None) -> str:
    """Where to go after login: a console path only, never another site."""
    if value and value.startswith(PREFIX + "/") and not value.startswith("//") and "\\" not in value:
        return value
    return PREFIX + "/"


def _redirect(location: str, **headers: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location, **headers})


def page(handler: Page) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A console page: the caller's principal, errors as HTML pages with the API's statuses, a redirect to the
    login form when reads need a credential, and the security headers on every answer."""

    async def run(request: web.Request) -> web.StreamResponse:
        ns = request.app[NS]
        try:
            resp = await handler(request, ns, console_principal(request))
        except Unauthorized:
            target = request.path_qs if request.method == "GET" else PREFIX + "/"
            resp = _redirect(f"{PREFIX}/login?next={quote(target, safe='')}")
        except NamesrvError as err:
            resp = render(request, "error.html", http_status(err), error=err, title=_ERROR_TITLES.get(
                type(err), "Error"))
        resp.headers.update(SECURITY_HEADERS)
        return resp

    run.__name__ = handler.__name__
    return run


class NoSuchCluster(QueryNotFound):
    code = "CLUSTER_NOT_FOUND"


_ERROR_TITLES = {TopicNotExist: "No such topic", QueryNotFound: "Not found", ReportNotFound: "No skew report yet",
                 NoSuchCluster: "No such cluster", Disabled: "Switched off", Forbidden: "Not allowed"}


# ------------------------------------------------------------------ pages

def _cluster_rows(now: int, live: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for b in live:
        d = b.to_dict(now)
        age, timeout = d["ageMillis"], d["heartbeatTimeoutMillis"] or 1
        d["health"] = "bad" if age >= timeout else "warn" if age >= timeout / 2 else "ok"
        rows.append(d)
    return rows


async def overview(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    """Clusters, each with its live brokers: address, role, last heartbeat age, data version, topic count."""
    info = await ns.cluster_info(who)
    now, live = await ns.live_brokers(who)
    rows = _cluster_rows(now, live)
    clusters = []
    for name, groups in sorted(info.cluster_addr_table.items()):
        members = [r for r in rows if r["cluster"] == name]
        clusters.append({"name": name, "groups": sorted(groups), "brokers": members,
                         "masters": sum(1 for r in members if r["brokerId"] == 0),
                         "stale": sum(1 for r in members if r["health"] != "ok")})
    return render(request, "overview.html", section="clusters", title="Clusters", clusters=clusters, now=now,
                  total_live=len(rows))


async def cluster_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    name = request.match_info["cluster"]
    now, live = await ns.live_brokers(who, name)
    info = await ns.cluster_info(who)
    if name not in info.cluster_addr_table:
        raise NoSuchCluster(f"no cluster named {name!r} is registered")
    groups = [info.broker_addr_table[g].to_dict() for g in sorted(info.cluster_addr_table[name])
              if g in info.broker_addr_table]
    topics: list[str] | None = None
    topics_note = ""
    try:
        topics = (await ns.topic_list(who, "cluster", name)).topics
    except Disabled as exc:
        topics_note = exc.message
    return render(request, "cluster.html", section="clusters", title=f"Cluster {name}", cluster=name,
                  brokers=_cluster_rows(now, live), groups=groups, topics=topics, topics_note=topics_note,
                  page_size=PAGE_SIZE)


async def topics_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    """Search topics by substring (case-insensitive), optionally one cluster's and one kind, paged."""
    q = request.query.get("q", "").strip()[:200]
    cluster = request.query.get("cluster", "").strip() or None
    kind = request.query.get("kind", "")
    kind = kind if kind in ("normal", "retry", "dlq", "system") else ""
    try:
        number = max(1, int(request.query.get("page", "1")))
    except ValueError:
        number = 1
    listed = await ns.topic_list(who, "cluster", cluster) if cluster else await ns.topic_list(who, "all")
    needle = q.lower()
    found = [t for t in sorted(listed.topics) if needle in t.lower() and (not kind or display.topic_kind(t) == kind)]
    pages = max(1, -(-len(found) // PAGE_SIZE))
    number = min(number, pages)
    shown = found[(number - 1) * PAGE_SIZE:number * PAGE_SIZE]
    entries = await asyncio.gather(*(ns.route(who, t) for t in shown))  # through the worker's route cache
    rows = []
    for topic, entry in zip(shown, entries, strict=True):
        queues = sorted((q.broker_name, q.write_queue_nums, q.perm) for q in entry.route.queue_datas) \
            if entry.route is not None else []
        rows.append({"topic": topic, "queues": queues, "write": sum(w for _, w, _ in queues)})
    clusters = sorted((await ns.cluster_info(who)).cluster_addr_table)
    return render(request, "topics.html", section="topics", title="Topics", q=q, cluster=cluster or "", kind=kind,
                  rows=rows, total=len(listed.topics), matches=len(found), page=number, pages=pages,
                  clusters=clusters)


def _route_rows(route: TopicRouteData) -> list[dict[str, Any]]:
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    for b in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(b.broker_name)
        rows.append({"broker": b.broker_name, "cluster": b.cluster, "zone": b.zone_name,
                     "addrs": sorted(b.broker_addrs.items()), "actingMaster": b.enable_acting_master,
                     "read": q.read_queue_nums if q else None, "write": q.write_queue_nums if q else None,
                     "perm": q.perm if q else None, "sysFlag": q.topic_sys_flag if q else None})
    return rows


async def topic_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    topic = request.match_info["topic"]
    entry = await ns.route(who, topic)
    if entry.route is None:
        raise TopicNotExist(f"No topic route info in name server for the topic: {topic}")
    route = entry.route
    rows = _route_rows(route)
    etag = route_body(ns, topic, entry).tag  # the page reloads when the route stream says it changed
    return render(request, "topic.html", section="topics", title=f"Topic {topic}", topic=topic, rows=rows, etag=etag,
                  total_read=sum(r["read"] or 0 for r in rows), total_write=sum(r["write"] or 0 for r in rows),
                  order_conf=route.order_topic_conf, filter_servers=sorted(route.filter_server_table.items()))


async def kv_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    names = await ns.kv_namespaces(who)
    counted = []
    for name in names:
        keys: int | None = None
        if len(counted) < KV_NAMESPACES_COUNTED:
            keys = len((await ns.kv_list(who, name)).table)
        counted.append((name, keys))
    return render(request, "kv.html", section="kv", title="KV config", namespaces=counted)


async def kv_namespace_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    name = request.match_info["namespace"]
    table = (await ns.kv_list(who, name)).table
    return render(request, "kv_namespace.html", section="kv", title=f"KV {name}", namespace=name,
                  items=sorted(table.items()))


async def skew_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    """The latest report (charts, tables, what changed) and the kept runs of the job, newest first."""
    try:
        summary = orjson.loads(await ns.skew_summary(who))
    except ReportNotFound:  # not an error: no run of the skew job has finished yet
        return render(request, "skew_none.html", section="skew", title="Topic load skew")
    runs = await ns.skew_history(who, HISTORY_RUNS)
    return render(request, "skew.html", section="skew", title="Topic load skew", s=summary, runs=runs,
                  **skew_charts(summary, runs))


def skew_charts(s: dict[str, Any], runs: list[dict[str, Any]], top: int = 15) -> dict[str, Any]:
    """The skew page's charts from a stored summary (the shape docs/skew-report.md fixes) and the kept runs
    (falling back to the summary's own trend when no run is kept)."""
    threshold = float(s.get("params", {}).get("concentratedShare") or 0.5)
    topics = [t for t in s.get("topics", []) if t.get("maxShare") is not None][:top]
    top_chart = charts.bar_chart(
        f"Most skewed topics (max write-queue share, top {len(topics)})",
        [(f"{t['cluster']} / {t['topic']}", float(t["maxShare"])) for t in topics],
        marker=threshold, marker_label=f"CONCENTRATED above {display.share(threshold, 0)}", warn=0.5,
        bad=threshold if threshold < 1 else 0.8)
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    for b in s.get("brokers", []):
        by_cluster.setdefault(b["cluster"], []).append(b)
    broker_charts = []
    for cluster, brokers in sorted(by_cluster.items()):
        fair = 1 / len(brokers)
        ordered = sorted(brokers, key=lambda b: -(b.get("share") or 0))[:30]
        broker_charts.append(charts.bar_chart(
            f"Broker load in {cluster} (share of write queues; fair share {display.share(fair)})",
            [(b["brokerName"], float(b.get("share") or 0)) for b in ordered], marker=fair,
            marker_label=f"fair share 1/{len(brokers)}", warn=min(1.0, fair * 1.25), bad=min(1.0, fair * 1.6)))
    gini: dict[str, list[tuple[int, float]]] = {}
    for row in s.get("imbalance", []):
        if row.get("gini") is not None:
            gini.setdefault(row["cluster"], []).append((int(row["takenAt"]), float(row["gini"])))
    window_chart = charts.line_chart("Gini of broker load per cluster, snapshot by snapshot in the window", gini,
                                     note="0 = every broker carries the same load; above ~0.3 deserves a look")
    per_run = [{**c, "runAt": r.get("runAt")} for r in runs for c in r.get("clusters") or []]
    per_cluster: dict[str, list[tuple[int, float]]] = {}
    for row in per_run or (s.get("trend") or {}).get("clusters") or []:
        if row.get("gini") is not None and row.get("runAt") is not None:
            per_cluster.setdefault(row["cluster"], []).append((int(row["runAt"]), float(row["gini"])))
    history_chart = charts.line_chart("Gini of broker load per cluster, report by report (history)", per_cluster,
                                      note="one point per run of the skew job")
    return {"top_chart": top_chart, "broker_charts": broker_charts, "window_chart": window_chart,
            "history_chart": history_chart}


async def controller_page(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    """RocketMQ 5 controller: each broker set's master, epochs and SyncStateSet, its replicas and their liveness."""
    from service.core.controller import controller_of

    ns.access.require(who, Role.READ)
    sets = await controller_of(ns).broker_sets([])
    return render(request, "controller.html", section="controller", title="Controller", sets=sets,
                  enabled=ns.settings.controller)


async def login_form(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    if not ns.access.reads_protected:
        return _redirect(PREFIX + "/")
    return render(request, "login.html", title="Log in", next=_next(request.query.get("next")), error="")


async def login(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    """Exchange a token that may read for a session cookie; the token itself is never stored in the browser."""
    if not _same_origin(request):
        raise Forbidden("cross-site form post")
    form = await request.post()
    target = _next(str(form.get("next", "")))
    token = str(form.get("token", "")).strip()
    candidate = ns.access.identify_token(token) if token else None
    if candidate is None:
        return render(request, "login.html", 401, title="Log in", next=target, error="That token is not valid.")
    ns.access.require(candidate, Role.READ)
    resp = _redirect(target)
    secure = request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"
    resp.set_cookie(COOKIE, new_session(ns), max_age=SESSION_S, path=PREFIX + "/", httponly=True,
                    samesite="Strict", secure=secure)
    return resp


async def logout(request: web.Request, ns: NameServer, who: Principal) -> web.Response:
    if not _same_origin(request):
        raise Forbidden("cross-site form post")
    resp = _redirect(PREFIX + "/login")
    resp.del_cookie(COOKIE, path=PREFIX + "/")
    return resp


async def to_console(request: web.Request) -> web.Response:
    return _redirect(PREFIX + "/")


async def static(request: web.Request) -> web.Response:
    found = assets().get(request.match_info["name"])
    if found is None:
        raise web.HTTPNotFound()
    data, content_type, _ = found
    return web.Response(body=data, content_type=content_type, headers={
        "Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"})


PAGES: tuple[tuple[str, str, Page], ...] = (
    ("GET", "/", overview),
    ("GET", "/clusters/{cluster}", cluster_page),
    ("GET", "/topics", topics_page),
    ("GET", "/topics/{topic}", topic_page),
    ("GET", "/kv", kv_page),
    ("GET", "/kv/{namespace}", kv_namespace_page),
    ("GET", "/skew", skew_page),
    ("GET", "/controller", controller_page),
    ("GET", "/login", login_form),
    ("POST", "/login", login),
    ("POST", "/logout", logout),
)


async def topic_events(request: web.Request) -> web.StreamResponse:
    """The topic page's live updates: its route stream (GET /v1/watch), with the console's session."""
    from service.http.watch import serve_stream  # console.py is imported by routes.py, as watch.py is

    ns, who = request.app[NS], console_principal(request)
    ns.access.require(who, Role.READ)
    return await serve_stream(request, who, [topic_name(request.match_info["topic"])])


def setup_console(app: web.Application, stats: RequestStats) -> None:
    """The console's routes, each guarded like an API route. They are not part of /openapi.json (HTML, not API)."""
    environment()
    assets()  # fail at start, not on the first page, if the package data is missing
    app.router.add_get(PREFIX, guarded(to_console, PREFIX, stats))
    for method, path, handler in PAGES:
        run = page(handler)
        if method == "POST":  # forms anyone may post: small bodies, refused by length before they are read
            run = limits.gated(run, "open", limits.CONSOLE_LOGIN_BYTES)
        app.router.add_route(method, PREFIX + path, guarded(run, PREFIX + path, stats))
    app.router.add_get(PREFIX + "/static/{name}", guarded(static, PREFIX + "/static/{name}", stats))
    events = PREFIX + "/topics/{topic}/events"
    app.router.add_get(events, guarded(topic_events, events, stats))
