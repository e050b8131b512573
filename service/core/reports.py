"""The NameServer's reports as a mixin of NameServer (nameserver.py): the skew job's summary, history and
trend, and where the registry stands against the sizing model."""

from __future__ import annotations

from typing import Any

from service.config import Settings
from service.core import capacity as sizing
from service.core import capacity_model
from service.core.access import Access, Principal, Role
from service.core.route_cache import RouteCache
from service.errors import InvalidArgument, ReportNotFound
from service.store import RouteStore, SnapshotStore
from service.store.members import MemberStore


class ReportOps:
    """Skew and capacity reports, for a NameServer with `access`, `settings`, `store`, `routes` and `snapshots`."""

    access: Access
    settings: Settings
    store: RouteStore
    routes: RouteCache
    snapshots: SnapshotStore

    async def skew_summary(self, who: Principal) -> str:
        """The latest skew summary JSON, as the Spark job stored it."""
        self.access.require(who, Role.READ)
        raw = await self.snapshots.skew_summary()
        if raw is None:
            raise ReportNotFound("no skew report yet: run `namesrv skew-report` (see docs/skew-report.md)")
        return raw

    SKEW_HISTORY_MAX = 1000

    async def skew_history(self, who: Principal, limit: int | str | None = None) -> list[dict[str, Any]]:
        """The kept skew runs, newest first, without their broker and topic lists: when each ran, on which
        snapshot, its totals and its clusters' metrics."""
        self.access.require(who, Role.READ)
        n = self.SKEW_HISTORY_MAX
        if limit is not None:
            try:
                n = int(limit)
            except (TypeError, ValueError):
                raise InvalidArgument("limit: an integer", field="limit") from None
            if not 1 <= n <= self.SKEW_HISTORY_MAX:
                raise InvalidArgument(f"limit: 1..{self.SKEW_HISTORY_MAX}", field="limit")
        runs = await self.snapshots.skew_history(n)
        return [{k: v for k, v in r.items() if k not in ("brokers", "topics")} for r in runs]

    async def skew_trend(self, who: Principal) -> dict[str, Any]:
        """The latest report's comparison with the runs before it (topics and brokers whose skew grew, newly
        flagged topics, each cluster's Gini run after run)."""
        self.access.require(who, Role.READ)
        trend = await self.snapshots.skew_trend()
        if trend is None:
            raise ReportNotFound("no skew report with a trend yet: run `namesrv skew-report` (see "
                                 "docs/skew-report.md)")
        return trend

    async def capacity(self, who: Principal) -> dict[str, Any]:
        """Where the registry stands against the sizing model (service/core/capacity.py): its brokers, topics and
        entries, its Redis's memory and CPU, the load the model gives a fleet of its shape, and the headroom."""
        self.access.require(who, Role.READ)
        stats = await self.store.capacity_stats()
        workers = len(await MemberStore(self.store).live())
        s = self.settings
        cache = {"entries": len(self.routes), "bytes": self.routes.bytes, "maxEntries": s.route_cache_max_entries,
                 "maxBytes": s.route_cache_max_bytes}  # this worker's
        return sizing.report(capacity_model.MODEL, stats, workers, route_cache=cache)
