"""One-shot maintenance commands against a shared Redis: take a snapshot, run an expiry scan."""

from __future__ import annotations

import json

from service.config import Settings
from service.core import NameServer
from service.store import connect_store


async def snapshot(settings: Settings) -> dict[str, object]:
    """Take one snapshot for the skew report now."""
    store = connect_store(settings)
    try:
        info = await NameServer(store, settings).snapshots.take(settings.snapshot_retention_s)
        return {"snapshot": info.snap_id, "rows": info.rows, "parts": info.parts, "bytes": info.bytes}
    finally:
        await store.close()


async def expire(settings: Settings) -> dict[str, object]:
    """Run one expiry scan now and report what expired."""
    store = connect_store(settings)
    try:
        expired = await NameServer(store, settings).expire_due()
        return {"expired": [{"cluster": c, "brokerAddr": a, "brokerName": n} for c, a, n in expired]}
    finally:
        await store.close()


COMMANDS = {"snapshot": snapshot, "expire": expire}


def to_text(result: dict[str, object]) -> str:
    return json.dumps(result)
