"""The store: the only code that knows Redis key names and talks to Redis (routes, snapshots, leases, the
skew summary, and the snapshot reader the Spark job uses)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.store.connect import connect_store
    from service.store.routes import RouteStore
    from service.store.snapshots import SnapshotInfo, SnapshotStore

__all__ = ["RouteStore", "SnapshotInfo", "SnapshotStore", "connect_store"]

# Imported on first use, so that `service.store.snapshot_reader` (Spark executors) and `service.store.keys`
# load without the async store, its scripts and fakeredis.
_LAZY = {
    "RouteStore": "service.store.routes",
    "SnapshotInfo": "service.store.snapshots",
    "SnapshotStore": "service.store.snapshots",
    "connect_store": "service.store.connect",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
