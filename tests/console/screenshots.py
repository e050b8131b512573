"""Screenshots of the console's main pages with real data, for docs/ and the README:

    python -m tests.console.screenshots [--out docs] [--summary tests/console/skew_summary.json]

Starts a real redis-server and `namesrv serve`, registers the fleet of tests/console/fleet.py, takes a snapshot,
runs the real skew job (PySpark), changes the fleet, snapshots and runs the job again (so the report has a
previous run to compare with), then browses the console in headless Chromium and saves docs/console-*.png.
`--summary` also keeps the job's summary (and its kept runs, as skew_history.json beside it) as the browser tests'
skew fixtures. Takes a few minutes (two Spark runs).
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import orjson

from service.store.snapshot_reader import RedisSpec, SnapshotReader
from tests.console import fleet
from tests.console.browser import launch
from tests.integration.conftest import Namesrv
from tests.redis_server import RedisServer

ADMIN, READ = "admin-token-screenshots-0001", "read-token-screenshots-0001"
PAGES = (
    ("overview", "/console/"),
    ("cluster", "/console/clusters/ClusterA"),
    ("topics", "/console/topics?q=order"),
    ("topic", "/console/topics/OrderPaid"),
    ("kv", "/console/kv/ORDER_TOPIC_CONFIG"),
    ("skew", "/console/skew"),
)


def namesrv(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs", help="directory for console-*.png (default docs)")
    ap.add_argument("--summary", help="also write the skew job's summary JSON here")
    args = ap.parse_args()
    redis = RedisServer().start()
    prefix = "shots" + uuid.uuid4().hex[:6]
    server = Namesrv(redis.url, prefix, admin_token=ADMIN, read_token=READ).wait_ready()
    env = {**os.environ, "NAMESRV_REDIS_URL": redis.url, "NAMESRV_KEY_PREFIX": prefix}
    try:
        fleet.register_all(server.url, ADMIN, counter=1)
        namesrv(env, "snapshot")
        with tempfile.TemporaryDirectory() as out:
            namesrv(env, "skew-report", "--since", "1h", "--out", out, "--master", "local[2]")
            changed = copy.deepcopy(fleet.TOPICS)
            changed["OrderPaid"]["broker-a"] = 24
            changed["ClickStream"]["broker-d"] = 40
            changed["ShipmentEvents"] = {"broker-b": 8, "broker-c": 2}
            fleet.register_all(server.url, ADMIN, changed, counter=2)
            namesrv(env, "snapshot")
            namesrv(env, "skew-report", "--since", "1h", "--out", out, "--master", "local[2]")
            if args.summary:
                Path(args.summary).write_bytes(Path(out, "summary.json").read_bytes())
                with SnapshotReader(RedisSpec(redis.url), prefix) as reader:
                    runs = reader.history()
                Path(args.summary).with_name("skew_history.json").write_bytes(
                    orjson.dumps(runs, option=orjson.OPT_INDENT_2))
        fleet.register_all(server.url, ADMIN, changed, counter=2)  # fresh heartbeats for the pictures
        fleet.call(server.url, "PUT", "/v1/kv/ORDER_TOPIC_CONFIG/OrderPaid", {"value": "broker-a:24;broker-b:4"},
                   ADMIN)
        fleet.call(server.url, "PUT", "/v1/kv/ORDER_TOPIC_CONFIG/InventoryReserved", {"value": "broker-a:8"}, ADMIN)
        with launch() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(server.url + "/console/")
            page.fill("#token", READ)
            page.click("button[type=submit]")
            for name, path in PAGES:
                page.goto(server.url + path)
                target = Path(args.out, f"console-{name}.png")
                page.screenshot(path=str(target), full_page=True)
                print(target)
    finally:
        server.stop()
        redis.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
