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
