"""Who may do what: credentials resolve to a Principal, and every operation names the role it needs.

Doors only turn their wire's credential into a Principal (HTTP: a bearer token; remoting: an ACL signature, a
client certificate or a trusted network); the decisions — role, cluster binding — are made here, once. The Java
NameServer has no access control at all (CVE-2023-33246/37582); tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import Enum

from service.config import ANY_CLUSTER, Settings, parse_broker_tokens
from service.errors import Forbidden, Unauthorized


class Role(Enum):
    """What an operation needs. Admin may do everything; broker may also read."""

    READ = "read"
    BROKER = "broker"
    ADMIN = "admin"


_GRANTS = {"admin": {Role.ADMIN, Role.BROKER, Role.READ}, "broker": {Role.BROKER, Role.READ},
           "read": {Role.READ}, "anonymous": set()}


@dataclass(frozen=True, slots=True)
class Principal:
    role: str  # "admin" | "broker" | "read" | "anonymous"
    clusters: frozenset[str] = frozenset()  # broker credentials: the clusters it may write; "*" = any
    via: str = ""  # how it was established (token, signature, certificate, network): for logs

    @classmethod
    def broker(cls, *clusters: str, via: str = "") -> Principal:
        return cls("broker", frozenset(clusters), via)

    @property
    def cluster_bound(self) -> bool:
        """A broker credential limited to named clusters (the cross-cluster rules apply to it)."""
        return self.role == "broker" and ANY_CLUSTER not in self.clusters

    def may_write(self, cluster: str) -> bool:
        return ANY_CLUSTER in self.clusters or cluster in self.clusters


ANONYMOUS = Principal("anonymous")
ADMIN = Principal("admin")


def _eq(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class Access:
    """The credentials configured at start, and the role/cluster decisions every door relies on."""

    def __init__(self, settings: Settings) -> None:
        self._brokers = parse_broker_tokens(settings.broker_tokens)
        self._admin = settings.admin_token
        self._read = settings.read_token
        self.open_mode = not (self._brokers or self._admin or self._read)
        self.reads_protected = bool(self._read)
        self.writes_open = not (self._brokers or self._admin)

    # --- credentials -> principal

    def identify_token(self, token: str | None) -> Principal | None:
        """The principal of a bearer token; None for a token nobody issued. Every candidate is compared."""
        if token is None:
            return ANONYMOUS
        found: Principal | None = None
        if self._admin and _eq(token, self._admin):
            found = ADMIN
        for cluster, tok in self._brokers:
            if _eq(token, tok) and found is None:
                found = Principal.broker(cluster, via="token")
        if self._read and _eq(token, self._read) and found is None:
            found = Principal("read", via="token")
        return found

    def secrets_for(self, access_key: str) -> list[tuple[Principal, str]]:
        """Candidate (principal, secret) pairs for a RocketMQ ACL AccessKey: `admin`, `read`, or a cluster name
        of NAMESRV_BROKER_TOKENS (a `*` entry signs for any cluster). The door checks the signature."""
        out: list[tuple[Principal, str]] = []
        if access_key == "admin" and self._admin:
            out.append((Principal("admin", via="signature"), self._admin))
        if access_key == "read" and self._read:
            out.append((Principal("read", via="signature"), self._read))
        for cluster, tok in self._brokers:
            if cluster == access_key:
                out.append((Principal.broker(cluster, via="signature"), tok))
            elif cluster == ANY_CLUSTER:
                out.append((Principal.broker(ANY_CLUSTER, via="signature"), tok))
        return out

    # --- decisions

    def require(self, who: Principal, role: Role, cluster: str | None = None) -> None:
        """Raise Unauthorized (no usable credential) or Forbidden (wrong role or cluster)."""
        if self.open_mode:
            return
        if role is Role.READ and not self.reads_protected:
            return
        if role is Role.BROKER and self.writes_open:
            return
        granted = _GRANTS[who.role]
        if role not in granted:
            if who.role == "anonymous":
                raise Unauthorized(f"this operation needs a {role.value} credential")
            raise Forbidden(f"a {who.role} credential may not do this (needs {role.value})")
        if role is Role.BROKER and cluster is not None and who.role == "broker" and not who.may_write(cluster):
            raise Forbidden(f"this broker credential may not write cluster {cluster!r}")
