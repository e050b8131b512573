"""RocketMQ ACL request signatures (HmacSHA1, base64) as Java's AclClientRPCHook and the ali-ons client compute them.

Algorithm, checked against these sources:
- apache/rocketmq develop `client/.../acl/common/AclClientRPCHook.java`: doBeforeRequest adds ext `AccessKey` (and
  `SecurityToken` when set) first, then signs the TreeMap of *all* ext fields after makeCustomHeaderToNet;
- `AclUtils.combineRequestContent`: concatenate the map's values (keys are not included) in key order, skipping
  the key `Signature`, encode UTF-8, append the raw body bytes; `AclSigner.calSignature`: HmacSHA1 keyed with the
  secret's UTF-8 bytes, base64 with padding. Known answer from `AclSignerTest`: ("RocketMQ", "12345678") gives
  "IUc8rrO/0gDch8CjObLQsW2rsiA=".
- server side, `auth/.../DefaultAuthenticationContextBuilder.build(ctx, RemotingCommand)` (5.x) and 4.9.x
  `PlainAccessValidator.parse`: the same content rebuilt from every received ext field except `Signature` (they also
  skip `UNIQUE_KEY_QUERY` for request version <= V4_9_3 (399) in 5.x, always in 4.9.x; NameServer codes never carry it).
- ali-ons 3.12 `lib/channel.js` beforeRequest: signs a map of AccessKey, OnsChannel ("ALIYUN") and every non-null
  customHeader field's toString(), keys sorted with JavaScript's default sort, values joined, UTF-8, body appended,
  `crypto.createHmac('sha1', secretKey)` base64; then sends ext AccessKey, OnsChannel and Signature. So the server-side
  rule above verifies ali-ons requests too, as long as every ext field came from the customHeader.
Key order is String.compareTo / JavaScript sort order: UTF-16 code units, not code points.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["ACCESS_KEY", "SECURITY_TOKEN", "SIGNATURE", "SIGNED_AT", "content", "sign", "signature_of", "verify"]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
# Ours, optional: when a signed request carries it (ms since the epoch, signed like every ext field), the server
# refuses it outside a time window, so a captured request cannot be replayed later. Stock RocketMQ clients do not
# send it and are unaffected; `namesrv admin` sends it.
SIGNED_AT = "SignedAt"


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def content(ext_fields: dict[str, str], body: bytes | bytearray | memoryview | None) -> bytes:
    """The signed bytes: values of every field but Signature, in UTF-16 key order, UTF-8, then the body."""
    values = [ext_fields[k] for k in sorted(ext_fields, key=_utf16_order) if k != SIGNATURE]
    text = "".join(values).encode("utf-8", "surrogatepass")
    return text + bytes(body) if body else text


def signature_of(data: bytes, secret: str) -> str:
    """AclSigner.calSignature: base64(HmacSHA1(secret UTF-8, data)). Java refuses an empty key, so do we."""
    if not secret:
        raise ValueError("empty secret key")
    return base64.b64encode(hmac.new(secret.encode("utf-8"), data, hashlib.sha1).digest()).decode("ascii")


def sign(
    ext_fields: dict[str, str],
    body: bytes | bytearray | memoryview | None,
    access_key: str,
    secret: str,
    *,
    security_token: str | None = None,
) -> dict[str, str]:
    """What AclClientRPCHook.doBeforeRequest leaves in extFields: a copy plus AccessKey (+SecurityToken), Signature."""
    ext = dict(ext_fields)
    ext.pop(SIGNATURE, None)
    ext[ACCESS_KEY] = access_key
    if security_token is not None:
        ext[SECURITY_TOKEN] = security_token
    ext[SIGNATURE] = signature_of(content(ext, body), secret)
    return ext


def verify(ext_fields: dict[str, str], body: bytes | bytearray | memoryview | None, secret: str) -> bool:
    """True when ext `Signature` matches the content rebuilt from all other ext fields and the body.

    Only the HMAC is checked: looking up `secret` by ext `AccessKey` (and rejecting a missing one) is the caller's job.
    """
    claimed = ext_fields.get(SIGNATURE)
    if not claimed or not secret:
        return False
    expected = signature_of(content(ext_fields, body), secret)
    return hmac.compare_digest(expected.encode("ascii"), claimed.encode("utf-8", "surrogatepass"))
