"""Bearer-token roles: broker tokens bound to clusters, an admin token, an optional read token.

The Java NameServer has no access control at all (CVE-2023-33246/37582); tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

ANY_CLUSTER = "*"


@dataclass(frozen=True)
class Principal:
    role: str  # "broker" | "admin" | "read" | "anonymous"
    cluster: str | None = None  # for broker tokens: the cluster it may write, "*" for any


def parse_broker_tokens(spec: str) -> list[tuple[str, str]]:
    """`clusterA:tok1,clusterB:tok2` (a bare token or `*:tok` may write any cluster) → [(cluster, token)]."""
    out: list[tuple[str, str]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        cluster, sep, token = part.rpartition(":")
        if not sep:
            cluster, token = ANY_CLUSTER, part
        if not token or len(token) < 8:
            from service.config import ConfigError

            raise ConfigError("broker_tokens: every token needs at least 8 characters")
        out.append((cluster or ANY_CLUSTER, token))
    return out


def _eq(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class Authenticator:
    """Resolves a bearer token to a Principal; `open_mode` when no token is configured at all."""

    def __init__(self, broker_tokens: str, admin_token: str, read_token: str) -> None:
        self._brokers = parse_broker_tokens(broker_tokens)
        self._admin = admin_token
        self._read = read_token
        self.open_mode = not (self._brokers or self._admin or self._read)

    @property
    def reads_protected(self) -> bool:
        return bool(self._read)

    @property
    def writes_open(self) -> bool:
        return not (self._brokers or self._admin)

    def identify(self, token: str | None) -> Principal | None:
        """The principal for a token; None for an unknown token. Every candidate is compared (no early exit)."""
        if token is None:
            return Principal("anonymous")
        found: Principal | None = None
        if self._admin and _eq(token, self._admin):
            found = Principal("admin")
        for cluster, tok in self._brokers:
            if _eq(token, tok) and found is None:
                found = Principal("broker", cluster)
        if self._read and _eq(token, self._read) and found is None:
            found = Principal("read")
        return found
