"""Who sent a remoting request: RocketMQ's ACL signature (AccessKey/Signature ext fields, as AclClientRPCHook
and ali-ons send them), else a verified TLS client certificate, else a trusted network, else anonymous.

Stock Java brokers sign nothing on their NameServer calls, so the certificate and network paths let an
unmodified broker register with auth on. What each principal may do is the core's decision
(service/core/access.py); a signature that does not verify is refused here, before anything runs.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable

from service.config import Settings, parse_trusted_networks
from service.core import ANONYMOUS, Access, Principal
from service.errors import Unauthorized
from service.remoting.signature import SIGNED_AT, verify

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SIGNATURE_WINDOW_S = 300  # how far a SignedAt may be from the worker's clock (replays later than this: refused)


class Credentials:
    def __init__(self, access: Access, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.access = access
        self.clock = clock
        self.networks = parse_trusted_networks(settings.remoting_trusted_networks)

    def of_connection(self, peer_ip: str | None, cert_cluster: str | None) -> Principal:
        """What an unsigned request on this connection is: its certificate's cluster, its network's clusters,
        or anonymous."""
        if cert_cluster:
            return Principal.broker(cert_cluster, via="certificate")
        if peer_ip and self.networks:
            try:
                ip = ipaddress.ip_address(peer_ip.split("%", 1)[0])
            except ValueError:
                return ANONYMOUS
            clusters = frozenset().union(*(names for net, names in self.networks if ip in net))
            if clusters:
                return Principal("broker", clusters, via="network")
        return ANONYMOUS

    def of_request(self, ext: dict[str, str], body: bytes, unsigned: Principal) -> Principal:
        """The signer of a signed request (Unauthorized when the signature does not verify); `unsigned` for a
        request without a signature.

        An empty AccessKey or Signature is no credential at all, not a failed one: the RocketMQ C++ client sends
        `AccessKey: ""` with a Signature on every call, and must read routes where reads need no credential.
        Where one is needed the core refuses such a request as it refuses an unsigned one.
        """
        access_key = ext.get(ACCESS_KEY)
        signature = ext.get(SIGNATURE)
        if not access_key or not signature:
            return unsigned
        for principal, secret in self.access.secrets_for(access_key):
            if verify(ext, body, secret):
                if SIGNED_AT in ext:
                    self._check_signed_at(ext[SIGNED_AT])
                return principal
        raise Unauthorized(f"signature of AccessKey {access_key!r} does not verify")

    def _check_signed_at(self, value: str) -> None:
        """A signed SignedAt (ms) must be within SIGNATURE_WINDOW_S of this worker's clock: a request captured
        and sent again later is refused. Requests without it (every stock client) are not checked."""
        try:
            age_s = (self.clock() * 1000 - int(value)) / 1000
        except ValueError:
            raise Unauthorized(f"SignedAt must be milliseconds since the epoch, got {value[:40]!r}") from None
        if abs(age_s) > SIGNATURE_WINDOW_S:
            raise Unauthorized(f"the request was signed {age_s:.0f} s from now, outside the {SIGNATURE_WINDOW_S} s "
                               "window: a replayed request, or a clock off")
