"""A fleet's cold start on two real workers over one real Redis: 200 brokers, each on its own connection, send
their first REGISTER_BROKER (framed as a stock 5.x broker frames it) at once over the native door. Every one is
accepted, and every topic's route lists every broker of its cluster on both workers.

The workers run with a small room for frames (2 MiB) and few requests in progress (40), so that the storm has to
wait its turn at the door (TCP backpressure) and at Redis (service/store/admission.py): before, the requests past
`remoting_max_pending` were answered SYSTEM_BUSY, a frame past the room closed its connection, and registrations
queued behind one another ran out of their Redis deadline. Measured at scale: `python -m benchmarks.storm`."""

from __future__ import annotations

import re
import urllib.request

import pytest

from benchmarks import storm

pytestmark = [pytest.mark.redis, pytest.mark.integration]


async def test_a_fleet_registering_at_once_is_accepted_and_routed_on_every_worker(namesrv_factory):
    workers = [namesrv_factory(remoting_max_pending=40, remoting_max_frame_bytes=1024 * 1024,
                               remoting_max_partial_bytes=2 * 1024 * 1024) for _ in range(2)]
    fleet = storm.Fleet(200, 200)
    res = await storm.storm(fleet, [w.remoting_port for w in workers])
    assert res["refused"] == 0, {k: res[k] for k in ("refused_codes", "refused_remarks", "closed", "unanswered")}
    assert res["routed_s"] is not None and res["pairs_unconfirmed"] == 0  # 10 clusters × 200 topics × 2 workers
    waited = 0
    for w in workers:
        text = urllib.request.urlopen(w.url + "/metrics", timeout=10).read().decode()
        waited += float(re.search(r"^namesrv_remoting_waits_total (\S+)$", text, re.M).group(1))
        assert not re.search(r'^namesrv_remoting_connections_closed_total\{reason="(?!peer)', text, re.M), text
        assert float(re.search(r"^namesrv_remoting_busy_total (\S+)$", text, re.M).group(1)) == 0
    assert waited > 0  # the door made connections wait for room: the storm was bigger than the workers' bounds
