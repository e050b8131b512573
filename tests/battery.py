"""Bad registrations every door must refuse with a clear error, writing nothing (hardening issue items 1-4).

Each case names a registration field and a bad value that is bad on any wire (a name with a trailing newline,
full-width digits in a port, a name with a space ...), or a bad topic name in the topic table. The HTTP battery
(tests/unit/test_bad_input.py) sends them as JSON, the native one (tests/remoting/test_bad_input_native.py) as
extFields and a RegisterBrokerBody.
"""

from __future__ import annotations

FIELD_CASES: list[tuple[str, str]] = [
    ("clusterName", "C1\n"),
    ("clusterName", "bad name"),
    ("clusterName", "x" * 128),
    ("brokerName", "b\n"),
    ("brokerName", "a/b"),
    ("brokerName", "broker\u00e9"),
    ("brokerAddr", "10.0.0.1:\uff11\uff10\uff19\uff11\uff11"),  # full-width digits
    ("brokerAddr", "10.0.0.1:10911\n"),
    ("brokerAddr", "10.0.0.1"),
    ("brokerAddr", "10.0.0.1:0"),
    ("brokerAddr", "10.0.0.1:70000"),
    ("brokerAddr", "host name:1"),
    ("haServerAddr", "nohost"),
    ("haServerAddr", "10.0.0.1:\u0661\u0662"),  # Arabic-Indic digits
    ("zoneName", "zone one"),
    ("zoneName", "z\n"),
]
TOPIC_CASES: list[str] = ["TT\n", "bad topic", "T" * 128, "T\u00e9", "t<script>"]

# KV namespaces and keys. Java's KVConfigManager keeps any text (PutKVConfigRequestHeader checks nothing but
# null), so ours takes any text too (KV_NAMES_KEPT, refused before issue 42: a kvConfig.json written by Java must
# import whole), except control characters, which no request or file carries cleanly, and more than 255
# characters (KV_NAME_CASES). Every door refuses the latter with a clear error and writes nothing.
KV_NAME_CASES: list[str] = ["ns\n", "a\tb", "k\x00", "\x1b[31mred", "nel\x85", "del\x7f", "x" * 256]
KV_NAMES_KEPT: list[str] = ["键", "clé de voûte", " padded ", "a/b?c#d%e&f=g", "emoji \U0001f680", "x" * 255,
                            "[red]", "<b>", "\u200bzero-width", "%RETRY%g"]
KV_VALUE_CASES: list[str] = ["v\x00", "bell\x07", "x" * (64 * 1024 + 1)]
