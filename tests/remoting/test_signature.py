"""service.remoting.signature: known answers from RocketMQ's AclSignerTest and from ali-ons' own signing code."""

from __future__ import annotations

import pytest

from service.remoting.signature import content, sign, signature_of, verify


def test_aclsigner_known_answer():
    # apache/rocketmq client/src/test/java/org/apache/rocketmq/acl/common/AclSignerTest.calSignatureTest
    assert signature_of(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


# Produced by ali-ons 3.12.0's Channel#beforeRequest via `node tests/remoting/js/probe.js sign ...`
# (test_alions_probe.py re-derives them live when node is present). ali-ons adds OnsChannel=ALIYUN.
ALIONS_SIGNED = [
    # probe.js sign --code 105 --ext topic=TopicA --access-key ak --secret sk
    (
        {"Signature": "e2P3t0guZNwfVE7uiZ3cT4/Vaz8=", "AccessKey": "ak", "OnsChannel": "ALIYUN", "topic": "TopicA"},
        b"",
        "sk",
    ),
    # probe.js sign --code 100 --ext namespace=ns --ext key=clé --ext value=v --body '{"counter":1}'
    #   --access-key AK-1 --secret secret-ü
    (
        {
            "Signature": "rm8SMaVjWU/JxjckTS+JSt81AKA=",
            "AccessKey": "AK-1",
            "OnsChannel": "ALIYUN",
            "namespace": "ns",
            "key": "clé",
            "value": "v",
        },
        b'{"counter":1}',
        "secret-ü",
    ),
    # probe.js sign --ext ｱ=1 --ext 😀=2 --ext a=3 --access-key ak --secret sk   (UTF-16 key order matters here)
    (
        {
            "Signature": "AGFLHoYRulsHzBy3atr/lpTnhfU=",
            "AccessKey": "ak",
            "OnsChannel": "ALIYUN",
            "\uff71": "1",
            "\U0001f600": "2",
            "a": "3",
        },
        b"",
        "sk",
    ),
]


@pytest.mark.parametrize("ext,body,secret", ALIONS_SIGNED, ids=["route", "body+utf8", "utf16-order"])
def test_verify_accepts_alions_signatures(ext, body, secret):
    assert verify(ext, body, secret)
    unsigned = {k: v for k, v in ext.items() if k not in ("Signature", "AccessKey")}
    assert sign(unsigned, body, ext["AccessKey"], secret) == ext


def test_content_is_values_in_key_order_then_body():
    ext = {"b": "2", "Signature": "ignored", "AccessKey": "ak", "a": "1"}
    # "AccessKey" < "a" < "b" (upper case sorts first), values only, body appended raw.
    assert content(ext, b"\x00BODY") == b"ak12\x00BODY"
    assert content({"\uff71": "x", "\U0001f600": "y"}, None) == b"yx"


def test_sign_adds_access_key_and_security_token_like_acl_client_rpc_hook():
    signed = sign({"topic": "T", "Signature": "stale"}, b"", "ak", "sk", security_token="tok")
    assert set(signed) == {"topic", "AccessKey", "SecurityToken", "Signature"}
    assert signed["Signature"] == signature_of(b"aktokT", "sk")  # AccessKey, SecurityToken, topic
    assert verify(signed, b"", "sk")


def test_verify_rejects_tampering():
    signed = sign({"topic": "T", "brokerId": "0"}, b"body", "ak", "sk")
    assert verify(signed, b"body", "sk")
    assert not verify(signed, b"bodY", "sk")
    assert not verify(signed, b"", "sk")
    assert not verify({**signed, "brokerId": "1"}, b"body", "sk")
    # Values only, no keys: an added empty field, or a value moved to a neighbouring key, goes unnoticed.
    assert verify({**signed, "extra": ""}, b"body", "sk")
    assert not verify({**signed, "extra": "x"}, b"body", "sk")
    assert not verify(signed, b"body", "other")
    assert not verify({k: v for k, v in signed.items() if k != "Signature"}, b"body", "sk")
    assert not verify({**signed, "Signature": "ünïcode"}, b"body", "sk")
    assert not verify(signed, b"body", "")


def test_empty_secret_cannot_sign():
    with pytest.raises(ValueError):
        sign({}, b"", "ak", "")
