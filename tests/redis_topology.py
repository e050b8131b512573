"""Throwaway real Redis Sentinel and Redis Cluster topologies on loopback (tests and benchmarks).

Every process is a `redis-server` on a free 127.0.0.1 port with its own temp dir, no persistence and quick
failure detection. Every wait is bounded: on a deadline a `TimeoutError` carries the last log lines of the
processes involved. `stop()` / `cleanup()` always end every process (an `atexit` hook does it too if a test
run is interrupted), so a failing test never leaks servers.

The helpers block (sync redis-py admin connections, short timeouts). From an async test that keeps a load
running meanwhile, call them in a thread: `await asyncio.to_thread(topo.failover)`.

    with SentinelTopology(password="data-pw", sentinel_password="sentinel-pw") as s:
        s.sentinel_addrs()  ->  [("127.0.0.1", p1), ...];  s.master_addr()  ->  ("127.0.0.1", port)
        s.failover(); s.kill_master(); s.restart(node)

    with ClusterTopology(password="pw") as c:
        c.seed_url(); slot = c.slot_of("{nsrv}:ver"); c.node_for_slot(slot)
        c.failover(slot); c.kill_primary(slot); c.restart(node); c.migrate_slot(slot, other_primary)
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.redis_server import free_port

HOST = "127.0.0.1"
T = TypeVar("T")

_live_nodes: set[RedisNode] = set()  # strong refs: an abandoned topology's processes still die at exit
_handed_out: set[int] = set()


def alloc_port() -> int:
    """A free loopback port never handed out before in this process (two topologies, or a node's client port
    and its cluster bus port, can't get the same one; another process can still grab it: see PortInUse)."""
    while True:
        port = free_port()
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class PortInUse(RuntimeError):
    """A node could not bind its port (another process took it meanwhile): retry with fresh ports."""


@atexit.register
def _kill_leftovers() -> None:  # a run interrupted before fixture teardown
    for node in list(_live_nodes):
        node.kill()


def _exe(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not installed (apt-get install -y redis-server)")
    return path


def _tail(path: str, n: int) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


class RedisNode:
    """One redis-server process (data node or sentinel) with a fixed port and dir: stop/kill/start keep both."""

    def __init__(self, name: str, base_dir: str, password: str | None = None) -> None:
        self.name = name
        self.port = alloc_port()
        self.dir = os.path.join(base_dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.password = password
        self.log = os.path.join(self.dir, "redis.log")
        self.out = os.path.join(self.dir, "stdout.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.node_id = ""  # cluster node id, once known
        self.client_kwargs: dict[str, Any] = {}  # e.g. TLS options for client() and the start-up PING

    def __repr__(self) -> str:
        return f"<RedisNode {self.name} {self.addr_str} {'up' if self.alive else 'down'}>"

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.port)

    @property
    def addr_str(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{HOST}:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self, timeout: float = 1.0, **kwargs: Any) -> redis.Redis:
        """A sync admin client (close it: use `with node.client() as c:`)."""
        return redis.Redis(host=HOST, port=self.port, password=self.password, socket_timeout=timeout,
                           socket_connect_timeout=timeout, decode_responses=True,
                           retry=Retry(NoBackoff(), 0), **{**self.client_kwargs, **kwargs})

    def cmd(self, *args: Any, timeout: float = 1.0) -> Any:
        with self.client(timeout) as c:
            return c.execute_command(*args)

    def info(self, section: str) -> dict[str, Any]:
        with self.client() as c:
            return c.info(section)

    def start(self, args: list[str], timeout: float = 10.0) -> RedisNode:
        if self.alive:
            raise RuntimeError(f"{self} is already running")
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.dir)
        _live_nodes.add(self)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                _live_nodes.discard(self)
                tail = self.log_tail()
                cls = PortInUse if "Address already in use" in tail else RuntimeError
                raise cls(f"{self.name} exited with {self.proc.returncode}\n" + tail)
            try:
                if self.cmd("PING", timeout=0.5):
                    return self
            except (redis.RedisError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not answer PING within {timeout}s\n" + self.log_tail())
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL (a crash: no shutdown, no config rewrite); returns once the process is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # also ends a frozen (SIGSTOPped) process
            self.proc.wait(10)
        _live_nodes.discard(self)

    def freeze(self) -> None:
        """SIGSTOP: the process stays connected but answers nothing (a hung node, a lagging replica)."""
        if self.alive:
            self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        _live_nodes.discard(self)

    def log_tail(self, n: int = 12) -> str:
        lines = _tail(self.log, n) + _tail(self.out, 4)
        return f"--- {self.name} ({self.addr_str}) ---\n" + "\n".join(lines)


class _Topology:
    """Shared bookkeeping: temp dir, processes, bounded polling with log tails on timeout."""

    def __init__(self, prefix: str, timeout: float) -> None:
        self.timeout = timeout
        self.base_dir = tempfile.mkdtemp(prefix=prefix)
        self.all_nodes: list[RedisNode] = []

    def __enter__(self: T) -> T:
        try:
            self.start()  # type: ignore[attr-defined]
        except BaseException:
            self.cleanup()  # type: ignore[attr-defined]
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def _logs(self, nodes: Iterable[RedisNode] | None = None) -> str:
        return "\n".join(n.log_tail() for n in (nodes if nodes is not None else self.all_nodes))

    def wait_for(self, what: str, pred: Callable[[], T], timeout: float | None = None,
                 nodes: Iterable[RedisNode] | None = None) -> T:
        """Poll `pred` until it returns a truthy value (Redis/socket errors count as "not yet")."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            try:
                value = pred()
                if value:
                    return value
            except (redis.RedisError, OSError) as exc:
                last = exc
            if time.monotonic() > deadline:
                detail = f" (last error: {last!r})" if last else ""
                raise TimeoutError(f"{what}: not reached within {timeout:.1f}s{detail}\n" + self._logs(nodes))
            time.sleep(0.05)

    def stop(self) -> None:
        for node in self.all_nodes:
            node.kill()  # no persistence: nothing to flush, and SIGKILL cannot hang

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_certs(d: str) -> None:
    """A throwaway CA (ca.crt), a server cert for IP 127.0.0.1 (ip.crt/.key) and one for another name only
    (other.crt/.key), in directory `d`."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
             "-subj", "/CN=nsrv-test-ca", cwd=d)
    for name, san in (("ip", "IP:127.0.0.1"), ("other", "DNS:redis.internal")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={name}", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={san}\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext", cwd=d)


def _tls_args(tls_dir: str) -> list[tuple[str, str]]:
    """TLS only (the plain port off), replication over TLS, the 127.0.0.1 certificate, no client certificates."""
    return [("tls-cert-file", os.path.join(tls_dir, "ip.crt")), ("tls-key-file", os.path.join(tls_dir, "ip.key")),
            ("tls-ca-cert-file", os.path.join(tls_dir, "ca.crt")), ("tls-auth-clients", "no"),
            ("tls-replication", "yes")]


def _data_args(node: RedisNode, password: str | None, extra: list[str], tls_dir: str | None = None) -> list[str]:
    ports = ["--port", "0", "--tls-port", str(node.port)] if tls_dir else ["--port", str(node.port)]
    for key, value in _tls_args(tls_dir) if tls_dir else []:
        ports += [f"--{key}", value]
    args = [_exe("redis-server"), *ports, "--bind", HOST, "--dir", node.dir,
            "--logfile", node.log, "--loglevel", "notice", "--daemonize", "no", "--save", "",
            "--appendonly", "no", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
            "--repl-ping-replica-period", "1", "--enable-debug-command", "local"]
    if password:
        args += ["--requirepass", password, "--masterauth", password]
    return args + extra


def _is_writable_master(node: RedisNode) -> bool:
    if not node.alive:
        return False
    with node.client() as c:
        if c.info("replication").get("role") != "master":
            return False
        return bool(c.set("__topology_probe__", "1", px=1000))


# ---------------------------------------------------------------------------------------------- Sentinel


class SentinelTopology(_Topology):
    """One primary + `replicas` replicas (default one) + three sentinels (quorum 2), all `redis-server` on 127.0.0.1.

    `password` protects the data nodes (`requirepass` + `masterauth`, and `sentinel auth-pass`);
    `sentinel_password` protects the sentinels (`requirepass` in their conf): the two may differ.
    `tls=True`: every node (sentinels too) listens on TLS only and replicates over TLS, with a throwaway CA
    (`tls_ca_file`) and a certificate for 127.0.0.1; clients must verify it.
    """

    def __init__(self, *, service_name: str = "mymaster", password: str | None = None,
                 sentinel_password: str | None = None, down_after_ms: int = 1000,
                 failover_timeout_ms: int = 1000, timeout: float = 30.0, tls: bool = False,
                 replicas: int = 1) -> None:
        super().__init__("nsrv-sentinel-", timeout)
        self.service_name = service_name
        self.password = password
        self.sentinel_password = sentinel_password
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.data_nodes = [RedisNode(f"data-{i}", self.base_dir, password) for i in range(1 + replicas)]
        self.sentinels = [RedisNode(f"sentinel-{i}", self.base_dir, sentinel_password) for i in range(3)]
        self.all_nodes = [*self.data_nodes, *self.sentinels]
        self.tls_dir: str | None = None
        if tls:
            self.tls_dir = os.path.join(self.base_dir, "tls")
            os.makedirs(self.tls_dir)
            make_certs(self.tls_dir)
            for node in self.all_nodes:
                node.client_kwargs = {"ssl": True, "ssl_ca_certs": self.tls_ca_file}

    @property
    def tls_ca_file(self) -> str | None:
        return os.path.join(self.tls_dir, "ca.crt") if self.tls_dir else None

    # ---- addresses

    def sentinel_addrs(self) -> list[tuple[str, int]]:
        return [s.addr for s in self.sentinels]

    def node_at(self, addr: tuple[str, int]) -> RedisNode:
        return next(n for n in self.data_nodes if n.addr == (addr[0], int(addr[1])))

    def master_addr(self) -> tuple[str, int]:
        """The master as reported by the first sentinel that answers."""
        last: BaseException | None = None
        for s in self.sentinels:
            if not s.alive:
                continue
            try:
                host, port = s.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service_name)
                return host, int(port)
            except (redis.RedisError, OSError, TypeError) as exc:
                last = exc
        raise redis.ConnectionError(f"no sentinel answered ({last!r})")

    def master_node(self) -> RedisNode:
        return self.node_at(self.master_addr())

    def replica_node(self) -> RedisNode:
        master = self.master_addr()
        return next(n for n in self.data_nodes if n.addr != master)

    def master_client(self, **kwargs: Any) -> redis.Redis:
        """A sync client straight to the current master (not following failovers)."""
        return self.master_node().client(**kwargs)

    # ---- life cycle

    def _sentinel_conf(self, node: RedisNode, master: RedisNode) -> str:
        name = self.service_name
        ports = [f"port {node.port}"]
        if self.tls_dir:
            ports = ["port 0", f"tls-port {node.port}"] + [f"{k} {v}" for k, v in _tls_args(self.tls_dir)]
        lines = [*ports, f"bind {HOST}", "daemonize no", f'dir "{node.dir}"',
                 f'logfile "{node.log}"', "loglevel notice", "sentinel resolve-hostnames no",
                 f"sentinel monitor {name} {HOST} {master.port} 2",
                 f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
                 f"sentinel failover-timeout {name} {self.failover_timeout_ms}",
                 f"sentinel parallel-syncs {name} 1"]
        if self.password:
            lines.append(f"sentinel auth-pass {name} {self.password}")
        if self.sentinel_password:
            lines.append(f"requirepass {self.sentinel_password}")  # also what sentinels use with each other
        return "\n".join(lines) + "\n"

    def _start_data(self, node: RedisNode, replica_of: RedisNode | None) -> None:
        extra = ["--replicaof", HOST, str(replica_of.port)] if replica_of else []
        node.start(_data_args(node, self.password, extra, self.tls_dir))

    def _start_sentinel(self, node: RedisNode) -> None:
        conf = os.path.join(node.dir, "sentinel.conf")
        if not os.path.exists(conf):  # sentinels rewrite their conf (epochs, known peers): keep it on restart
            with open(conf, "w") as f:
                f.write(self._sentinel_conf(node, self.data_nodes[0]))
        node.start([_exe("redis-server"), conf, "--sentinel"])

    @staticmethod
    def _first_start(node: RedisNode, start: Callable[[], None]) -> None:
        for attempt in range(5):
            try:
                return start()
            except PortInUse:
                if attempt == 4:
                    raise
                node.port = alloc_port()
                shutil.rmtree(node.dir, ignore_errors=True)
                os.makedirs(node.dir)

    def start(self) -> SentinelTopology:
        primary, *replicas = self.data_nodes
        self._first_start(primary, lambda: self._start_data(primary, None))
        for replica in replicas:
            self._first_start(replica, lambda replica=replica: self._start_data(replica, primary))
        for s in self.sentinels:
            self._first_start(s, lambda s=s: self._start_sentinel(s))
        self.wait_settled(primary)
        return self

    def _sentinel_view_ok(self, s: RedisNode, master: RedisNode, replicas: list[RedisNode]) -> bool:
        """`s` reports `master` (healthy, no failover running, all peers known) and lists every live replica as
        reachable. (A sentinel refreshes a replica's link status from INFO only every 10 s, so that is read from
        the replicas themselves, not from here.)"""
        with s.client() as c:
            m = c.sentinel_master(self.service_name)
            if (m["ip"], int(m["port"])) != master.addr or not m["is_master"] or m["is_sdown"] or m["is_odown"]:
                return False
            if m.get("failover-state", "none") not in ("none", "") or m.get("is_failover_in_progress"):
                return False
            if int(m["num-other-sentinels"]) < len(self.sentinels) - 1:
                return False
            seen = {(r["ip"], int(r["port"])): r for r in c.sentinel_slaves(self.service_name)}
        for r in replicas:
            info = seen.get(r.addr)
            if info is None or info["is_sdown"] or info["is_odown"] or info.get("is_disconnected"):
                return False
        return True

    def wait_settled(self, master: RedisNode | None = None, timeout: float | None = None,
                     demote: bool = True) -> RedisNode:
        """Until every live sentinel reports `master` (default: the reported one), it is writable, and every
        other live data node replicates from it with the link up and is listed by the sentinels.

        With `demote`, a node still acting as a master once the sentinels agree on another one is sent
        `REPLICAOF <master>` + `CLIENT KILL TYPE normal|pubsub` right away: exactly what the sentinels send
        themselves, but only 8-10 s later (they wait 4 hello periods before reconfiguring an instance that
        reports a stale role). With `demote=False` the wait includes that natural delay."""

        def settled() -> bool:
            m = master or self.master_node()
            if not _is_writable_master(m):
                return False
            if not all(self._sentinel_view_ok(s, m, []) for s in self.sentinels if s.alive):
                return False
            replicas = [n for n in self.data_nodes if n is not m and n.alive]
            for r in replicas:
                info = r.info("replication")
                if info.get("role") == "master" and demote:
                    with r.client() as c:
                        with c.pipeline(transaction=True) as p:
                            p.execute_command("REPLICAOF", HOST, m.port)
                            p.execute_command("CLIENT", "KILL", "TYPE", "normal")  # SKIPME yes: not us
                            p.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
                            p.execute()
                    return False
                if (info.get("role") != "slave" or info.get("master_port") != m.port
                        or info.get("master_link_status") != "up"):
                    return False
            return all(self._sentinel_view_ok(s, m, replicas) for s in self.sentinels if s.alive)

        self.wait_for("sentinel topology settled", settled, timeout)
        return master or self.master_node()

    def _wait_new_master(self, old: tuple[str, int], timeout: float | None) -> RedisNode:
        def promoted() -> RedisNode | None:
            addrs = set()
            for s in self.sentinels:
                if s.alive:
                    host, port = s.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service_name)
                    addrs.add((host, int(port)))
            if len(addrs) != 1 or old in addrs:
                return None
            node = self.node_at(addrs.pop())
            return node if _is_writable_master(node) else None

        return self.wait_for(f"sentinels promote a master other than {old}", promoted, timeout)

    def failover(self, timeout: float | None = None, settle: bool = True, demote: bool = True) -> RedisNode:
        """SENTINEL FAILOVER; returns the new master once every sentinel reports it and it is writable. With
        `settle` (default), also once the old master replicates from it (`wait_settled(demote=demote)`), so a
        next failover can follow; with `settle=False` the old master is left as the sentinels leave it: still a
        writable master for about 10 s."""
        old = self.master_addr()

        def requested() -> bool:
            try:
                return bool(self.sentinels[0].cmd("SENTINEL", "FAILOVER", self.service_name))
            except redis.ResponseError as exc:  # INPROG / NOGOODSLAVE while the sentinels catch up
                if "INPROG" in str(exc) or "NOGOODSLAVE" in str(exc):
                    return False
                raise

        self.wait_for("SENTINEL FAILOVER accepted", requested, timeout)
        new = self._wait_new_master(old, timeout)
        if settle:
            self.wait_settled(new, timeout, demote=demote)
        return new

    def kill_master(self, timeout: float | None = None) -> RedisNode:
        """SIGKILL the current primary; returns the promoted replica once every live sentinel reports it and it is
        writable. The killed node stays down (`restart(node)` brings it back as a replica)."""
        old = self.master_node()
        old.kill()
        return self._wait_new_master(old.addr, timeout)

    def restart(self, node: RedisNode, timeout: float | None = None) -> RedisNode:
        """Start a stopped/killed node again (same port and dir). A data node comes back as a replica of the
        current master; returns once the topology is settled."""
        if node.alive:
            node.kill()
        if node in self.sentinels:
            self._start_sentinel(node)
        else:
            self._start_data(node, self.master_node())
        self.wait_settled(None, timeout)
        return node


# ----------------------------------------------------------------------------------------------- Cluster


def _parse_nodes(text: str) -> list[dict[str, Any]]:
    """CLUSTER NODES → [{id, port, flags, master, link, slots}]."""
    out = []
    for line in text.strip().splitlines():
        parts = line.split()
        addr = parts[1].split("@")[0]
        slots: set[int] = set()
        for s in parts[8:]:
            if s.startswith("["):  # migrating/importing markers
                continue
            lo, _, hi = s.partition("-")
            slots.update(range(int(lo), int(hi or lo) + 1))
        out.append({"id": parts[0], "port": int(addr.rsplit(":", 1)[1]), "flags": set(parts[2].split(",")),
                    "master": parts[3], "link": parts[7], "slots": slots})
    return out


class SlotMigration:
    """The manual resharding procedure for one slot, step by step (so a test can act half-way through):
    `begin()` (IMPORTING on the target, MIGRATING on the source), `move(count)` or `move(keys=[...])`
    (MIGRATE in one batch), `finish()` (move what is left, SETSLOT NODE on target, source, then every primary)."""

    def __init__(self, topo: ClusterTopology, slot: int, source: RedisNode, target: RedisNode) -> None:
        if source is target:
            raise ValueError(f"slot {slot} is already served by {target}")
        self.topo, self.slot, self.source, self.target = topo, slot, source, target
        self.moved: list[str] = []

    def begin(self) -> SlotMigration:
        self.target.cmd("CLUSTER", "SETSLOT", self.slot, "IMPORTING", self.source.node_id)
        self.source.cmd("CLUSTER", "SETSLOT", self.slot, "MIGRATING", self.target.node_id)
        return self

    def keys_left(self, count: int = 1000) -> list[str]:
        return self.source.cmd("CLUSTER", "GETKEYSINSLOT", self.slot, count)

    def move(self, count: int = 100, keys: list[str] | None = None, replace: bool = False) -> list[str]:
        """MIGRATE `keys` (default: up to `count` keys still on the source) to the target in one call. Without
        `replace`, a key that already exists on the target fails the call (BUSYKEY), as in redis-cli."""
        keys = self.keys_left(count) if keys is None else keys
        if keys:
            auth = ["AUTH", self.topo.password] if self.topo.password else []
            opt = ["REPLACE"] if replace else []
            self.source.cmd("MIGRATE", HOST, self.target.port, "", 0, 5000, *opt, *auth, "KEYS", *keys,
                            timeout=10.0)
            self.moved += keys
        return keys

    def finish(self, timeout: float | None = None) -> RedisNode:
        while self.move(1000):
            pass
        target_id = self.target.node_id
        self.target.cmd("CLUSTER", "SETSLOT", self.slot, "NODE", target_id)
        self.source.cmd("CLUSTER", "SETSLOT", self.slot, "NODE", target_id)
        for p in self.topo.primaries():
            if p is not self.target and p is not self.source:
                p.cmd("CLUSTER", "SETSLOT", self.slot, "NODE", target_id)
        self.topo.wait_settled({self.slot: self.target}, timeout)
        return self.target


class ClusterTopology(_Topology):
    """`primaries` primaries with `replicas` replicas each (default 3 + 3), created by
    `redis-cli --cluster create`, on 127.0.0.1; each node has its own dir (and `cluster-config-file`), so a
    restarted node keeps its identity. `password` sets `requirepass` and `masterauth` on every node.

    `tls=True`: every node listens on TLS only, replicates and talks on the cluster bus over TLS (`tls-cluster`),
    with a throwaway CA (`tls_ca_file`) and a certificate for 127.0.0.1; clients must verify it."""

    def __init__(self, *, primaries: int = 3, replicas: int = 1, password: str | None = None,
                 node_timeout_ms: int = 1000, timeout: float = 30.0, tls: bool = False) -> None:
        super().__init__("nsrv-cluster-", timeout)
        self.password = password
        self.node_timeout_ms = node_timeout_ms
        self.n_primaries, self.n_replicas = primaries, replicas
        self.nodes = [RedisNode(f"node-{i}", self.base_dir, password) for i in range(primaries * (1 + replicas))]
        self.all_nodes = self.nodes
        self.bus_ports = {n.name: alloc_port() for n in self.nodes}
        self.tls_dir: str | None = None
        if tls:
            self.tls_dir = os.path.join(self.base_dir, "tls")
            os.makedirs(self.tls_dir)
            make_certs(self.tls_dir)
            for node in self.nodes:
                node.client_kwargs = {"ssl": True, "ssl_ca_certs": self.tls_ca_file}

    @property
    def tls_ca_file(self) -> str | None:
        return os.path.join(self.tls_dir, "ca.crt") if self.tls_dir else None

    # ---- views

    def live(self) -> list[RedisNode]:
        return [n for n in self.nodes if n.alive]

    def node_by_id(self, node_id: str) -> RedisNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def node_by_port(self, port: int) -> RedisNode:
        return next(n for n in self.nodes if n.port == int(port))

    def _view(self, via: RedisNode | None = None) -> list[dict[str, Any]]:
        for n in [via] if via else self.live():
            try:
                return _parse_nodes(n.cmd("CLUSTER", "NODES"))
            except (redis.RedisError, OSError):
                continue
        raise redis.ConnectionError("no cluster node answered CLUSTER NODES")

    def primaries(self) -> list[RedisNode]:
        return [self.node_by_id(e["id"]) for e in self._view()
                if "master" in e["flags"] and "fail" not in e["flags"] and e["slots"]]

    def replicas(self) -> list[RedisNode]:
        return [self.node_by_id(e["id"]) for e in self._view() if "slave" in e["flags"] and "fail" not in e["flags"]]

    def replica_of(self, primary: RedisNode) -> RedisNode:
        for e in self._view():
            if e["master"] == primary.node_id and "fail" not in e["flags"] and self.node_by_id(e["id"]).alive:
                return self.node_by_id(e["id"])
        raise LookupError(f"{primary} has no live replica")

    def seed_url(self) -> str:
        """`redis://[:password@]127.0.0.1:port` of a live node (any node serves as a startup node); with TLS
        `rediss://…?ssl_ca_certs=<the CA>`."""
        url = self.live()[0].url
        if self.tls_dir:
            url = "rediss://" + url.removeprefix("redis://") + f"?ssl_ca_certs={self.tls_ca_file}"
        return url

    def startup_nodes(self) -> list[tuple[str, int]]:
        return [n.addr for n in self.live()]

    def slot_of(self, key: str) -> int:
        return int(self.live()[0].cmd("CLUSTER", "KEYSLOT", key))

    def node_for_slot(self, slot: int) -> RedisNode:
        """The primary serving `slot`, as seen by a live node."""
        for e in self._view():
            if slot in e["slots"] and "master" in e["flags"]:
                return self.node_by_id(e["id"])
        raise LookupError(f"no primary serves slot {slot}")

    # ---- life cycle

    def _args(self, node: RedisNode) -> list[str]:
        return _data_args(node, self.password, [
            "--cluster-enabled", "yes", "--cluster-config-file", os.path.join(node.dir, "nodes.conf"),
            "--cluster-port", str(self.bus_ports[node.name]), "--cluster-node-timeout", str(self.node_timeout_ms),
            "--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no",
            *(["--tls-cluster", "yes"] if self.tls_dir else []),
        ], self.tls_dir)

    def start(self) -> ClusterTopology:
        for n in self.nodes:
            for attempt in range(5):
                try:
                    n.start(self._args(n))
                    break
                except PortInUse:
                    if attempt == 4:
                        raise
                    n.port, self.bus_ports[n.name] = alloc_port(), alloc_port()
        for n in self.nodes:
            n.node_id = n.cmd("CLUSTER", "MYID")
        cli = [_exe("redis-cli"), "--cluster", "create", *[n.addr_str for n in self.nodes],
               "--cluster-replicas", str(self.n_replicas), "--cluster-yes"]
        if self.password:
            cli += ["-a", self.password, "--no-auth-warning"]
        if self.tls_dir:
            cli += ["--tls", "--cacert", self.tls_ca_file]
        try:
            res = subprocess.run(cli, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"redis-cli --cluster create took over {self.timeout}s\n" + self._logs()) from exc
        if res.returncode != 0 or "[OK] All 16384 slots covered" not in res.stdout:
            raise RuntimeError(f"redis-cli --cluster create failed ({res.returncode}):\n{res.stdout}\n{res.stderr}\n"
                               + self._logs())
        self.wait_settled()
        return self

    def _settled(self, owners: dict[int, RedisNode] | None = None) -> bool:
        live = self.live()
        views = []
        for n in live:
            info = n.cmd("CLUSTER", "INFO")
            if "cluster_state:ok" not in info or f"cluster_known_nodes:{len(self.nodes)}" not in info:
                return False
            views.append(_parse_nodes(n.cmd("CLUSTER", "NODES")))
        # every live node has the same picture: same slot owners, nobody alive flagged as failing
        maps = [{e["id"]: (frozenset(e["slots"]), e["master"]) for e in v if "master" in e["flags"] or
                 e["master"] != "-"} for v in views]
        if any(m != maps[0] for m in maps[1:]):
            return False
        live_ids = {n.node_id for n in live}
        for v in views:
            for e in v:
                if e["id"] in live_ids and ({"fail", "fail?"} & e["flags"] or e["link"] != "connected"):
                    return False
        masters = [e for e in views[0] if "master" in e["flags"] and e["slots"]]
        if len(masters) != self.n_primaries or sum(len(e["slots"]) for e in masters) != 16384:
            return False
        for e in masters:
            if self.node_by_id(e["id"]) not in live:
                return False
        for slot, node in (owners or {}).items():
            if not any(slot in e["slots"] and e["id"] == node.node_id for e in masters):
                return False
        # the roles the nodes report agree, and every live replica has its link up
        for n in live:
            info = n.info("replication")
            entry = next(e for e in views[0] if e["id"] == n.node_id)
            if "master" in entry["flags"]:
                if info.get("role") != "master":
                    return False
            elif info.get("role") != "slave" or info.get("master_link_status") != "up":
                return False
        return True

    def wait_settled(self, owners: dict[int, RedisNode] | None = None, timeout: float | None = None) -> None:
        """Until every live node reports cluster_state:ok and the same slot map (with `owners` if given), and
        every live replica has its replication link up."""
        self.wait_for(f"cluster settled{f' with {owners}' if owners else ''}", lambda: self._settled(owners),
                      timeout)

    def failover(self, slot: int, timeout: float | None = None) -> RedisNode:
        """CLUSTER FAILOVER on the replica of the primary owning `slot`; returns it once it owns the slot and the
        cluster is settled (the old primary then replicates from it)."""
        replica = self.replica_of(self.node_for_slot(slot))
        replica.cmd("CLUSTER", "FAILOVER")
        self.wait_settled({slot: replica}, timeout)
        return replica

    def kill_primary(self, slot: int, timeout: float | None = None) -> RedisNode:
        """SIGKILL the primary owning `slot`; returns its replica once promoted and the cluster state is ok on
        every live node. The killed node stays down (`restart(node)` brings it back as a replica)."""
        old = self.node_for_slot(slot)
        replica = self.replica_of(old)
        old.kill()
        self.wait_settled({slot: replica}, timeout)
        return replica

    def restart(self, node: RedisNode, timeout: float | None = None) -> RedisNode:
        """Start a killed node again with its nodes.conf (same identity); a former primary whose slots moved comes
        back as a replica of its successor. Returns once the cluster is settled."""
        if node.alive:
            node.kill()
        node.start(self._args(node))
        self.wait_settled(None, timeout)
        return node

    def begin_migration(self, slot: int, to_node: RedisNode) -> SlotMigration:
        """IMPORTING/MIGRATING set, nothing moved yet: drive it with `.move()` and `.finish()`."""
        return SlotMigration(self, slot, self.node_for_slot(slot), to_node).begin()

    def migrate_slot(self, slot: int, to_node: RedisNode, batch: int = 10,
                     on_batch: Callable[[SlotMigration, list[str]], None] | None = None,
                     timeout: float | None = None) -> RedisNode:
        """Move `slot` (and its keys, `batch` per MIGRATE) to the primary `to_node`. `on_batch(migration, keys)`
        runs after each batch, while the slot is half-moved (block in it to let a test exercise ASK)."""
        m = self.begin_migration(slot, to_node)
        while True:
            keys = m.move(batch)
            if not keys:
                break
            if on_batch:
                on_batch(m, keys)
        return m.finish(timeout)
