"""Automatic master failover of RocketMQ 5 brokers in controller mode: time from kill -9 of the master to the new
master in the routes and to the first message it acknowledges, and whether any acknowledged message went missing.

    python -m benchmarks.controller_failover [--kills 2] [--tiny] [--out benchmarks/results]

Apache's controller as issue 23 names it: three Apache NameServers 5.5.0, each with a controller embedded (a
DLedger group of three); then ours: two of our workers with NAMESRV_CONTROLLER=true on one Redis (`controllerAddr`
and `namesrvAddr` both name them). Each time one broker group of three stock 5.5.0 brokers in controller mode
(allAckInSyncStateSet), a producer sending a message every 20 ms (sync sends; route refresh every second, both
sides alike) and a push consumer. `--kills` times: once all three are in the SyncStateSet the master is SIGKILLed,
the bench times the route change and the first send the new master acknowledged (the producer's lines carry the
time and the storing broker's address), then restarts the old master and waits until it is registered again as a
slave. At the end every acknowledged key must have reached the consumer.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.harness import git_info, machine_info, write_results

ROOT = Path(__file__).resolve().parent


def run(kills: int, ours: bool) -> dict:
    from tests.interop import rocketmq as rmq
    from tests.interop.conftest import OurNameServer
    from tests.interop.controller import ApacheControllers, in_sync, kill_master, registered_addrs, start_group
    from tests.redis_server import RedisServer

    line = rmq.LINE5
    if not rmq.built():
        rmq.build()
    root = rmq.temp_root("controller-failover-")
    procs: list = []
    clients = rmq.Clients(line, root)
    server = ours_ns = None
    try:
        if ours:
            server = RedisServer().start()
            ours_ns = OurNameServer(server.url, "failover", {"controller": "true"}).start()
            namesrv = controller = ours_ns.addrs
            route_port = ours_ns.procs[0].remoting_port
            ctl_ports = [p.remoting_port for p in ours_ns.procs]
            label = "ours: 2 workers, controller on, one Redis"
        else:
            ctl = ApacheControllers(line, root).start()
            procs += ctl.procs
            namesrv, controller = ctl.namesrv, ctl.controller
            route_port, ctl_ports = ctl.route_port, ctl.ctl_ports
            label = "Apache 5.5.0, 3 embedded in NameServers (DLedger)"
        t0 = time.time()
        brokers = start_group(line, root, "FailoverCluster", "broker-f", namesrv, controller)
        procs += brokers
        rmq.wait_until(lambda: 0 in registered_addrs(route_port, "broker-f"), 120, "a master registered")
        first_master_s = time.time() - t0
        rmq.wait_until(lambda: len(registered_addrs(route_port, "broker-f")) == 3, 120, "all three registered")
        out = clients.mqadmin([["updateTopic", "-n", namesrv, "-c", "FailoverCluster", "-t", "FailoverTopic",
                                "-r", "4", "-w", "4"]])
        if "success" not in out[0]:
            raise RuntimeError(f"updateTopic: {out[0][-500:]}")
        producer = clients.producer(namesrv, "FailoverTopic", 100_000, **{
            "interval-ms": 20, "timeout-s": 600, "poll-ms": 1000, "retry-ms": 50}).wait_started()
        consumer = clients.consumer(namesrv, "FailoverTopic", "failover_consumer").wait_started()
        procs += [producer.proc, consumer.proc]
        rounds = []
        for k in range(kills):
            # a master whose SyncStateSet is itself alone has no replica to hand over to (unclean elections off)
            rmq.wait_until(lambda: len(in_sync(ctl_ports, "broker-f")) == 3, 120, "all three in sync")
            time.sleep(2)
            print(f"kill {k + 1}: in sync {in_sync(ctl_ports, 'broker-f')}", flush=True)
            f = kill_master(brokers, route_port, "FailoverTopic", producer)
            victim = next(b for b in brokers if b.addr == f.killed)
            victim.restart()
            t1 = time.time()
            rmq.wait_until(lambda v=victim: v.addr in registered_addrs(route_port, "broker-f").values()
                           and registered_addrs(route_port, "broker-f").get(0) != v.addr, 120,
                           "the old master back as a slave")
            rounds.append({**asdict(f), "rejoined_as_slave_s": time.time() - t1})
            print(f"kill {k + 1}: {rounds[-1]}", flush=True)
        time.sleep(3)
        producer.proc.signal_stop()  # its lines so far are all there is
        producer.proc.wait_stopped(30)
        acked = producer.acked()
        rmq.wait_until(lambda: set(acked) <= set(consumer.received()), 120, "every acknowledged key consumed")
        consumer.stop()
        return {"controller": label, "first_master_s": first_master_s,
                "acknowledged": len(acked), "missing": len(set(acked) - set(consumer.received())), "kills": rounds}
    finally:
        rmq.stop_all(procs)
        if ours_ns is not None:
            ours_ns.stop()
        if server is not None:
            server.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=2)
    p.add_argument("--tiny", action="store_true", help="one kill")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    if args.tiny:
        args.kills = 1
    runs = [run(args.kills, ours=False), run(args.kills, ours=True)]
    doc = {"date": time.strftime("%Y-%m-%d"), "git_sha": git_info()["sha"][:10], "machine": machine_info(),
           "runs": runs}
    rows = [f"| {r['controller']} | {k + 1} | {f['route_ms']:.0f} | {f['first_send_ms']:.0f} | {f['failed_sends']} "
            f"| {f['rejoined_as_slave_s']:.1f} | {r['acknowledged']} | {r['missing']} |"
            for r in runs for k, f in enumerate(r["kills"])]
    table = "\n".join([
        f"Measured {doc['date']} on {doc['machine']['summary']}, git {doc['git_sha']}: one group of three 5.5.0 "
        "brokers in controller mode, a sync send every 20 ms, kill -9 of the master (Apache's controllers, then ours).",
        "",
        "| controller | kill | route names the new master, ms | first send acknowledged by it, ms | failed sends "
        "| old master back as slave, s | acknowledged | missing at the consumer |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]) + "\n"
    write_results(Path(args.out), "controller-failover", doc, table, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
