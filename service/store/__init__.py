"""The store: the only code that knows Redis key names and talks to Redis (routes, snapshots, leases, the
skew summary, and the snapshot reader the Spark job uses)."""

from service.store.connect import connect_store
from service.store.routes import RouteStore
from service.store.snapshots import SnapshotInfo, SnapshotStore

__all__ = ["RouteStore", "SnapshotInfo", "SnapshotStore", "connect_store"]
