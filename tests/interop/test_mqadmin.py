"""mqadmin for real: rocketmq-tools' own MQAdminStartup, `-n` at our NameServer and, the same commands in the
same order, at Apache's NameServer fed by the same brokers. The outputs must be equal once the NameServer's own
address, timestamps and live counters are normalised.
"""

from __future__ import annotations

import difflib
import re

from service.remoting import faq, fastjson
from tests.interop import rocketmq as rmq
from tests.interop.conftest import Deployment, http_json
from tests.interop.test_e2e import _apache_route, _standard

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO|WARN|ERROR) ")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(,\d{3})?")
FAQ_BEFORE_5_1 = "http://rocketmq.apache.org/docs/faq/"  # 4.9's and 5.0's FAQUrl: docs/deviations.md "FAQ link"


def _phases(dep: Deployment, ns: str) -> list[list[list[str]]]:
    """README's mqadmin commands and the issue's list in three phases, reads around every write so each write's
    effect shows. Phase 2 creates a topic on the brokers, which register it with both NameServers: every phase
    runs against ours and then against Apache's before the next begins, so both see the same brokers' state.
    Phase 3's writes are each NameServer's own and are undone within the phase."""
    topic = "MQADMIN_T"
    master = dep.brokers["a0"].addr
    n = ["-n", ns]
    reads = [
        ["clusterList", *n],
        ["topicList", *n],
        ["topicRoute", *n, "-t", topic],
        ["topicRoute", *n, "-t", "MQADMIN_MISSING"],  # TOPIC_NOT_EXIST: Java's remark, FAQ link and all
        ["topicStatus", *n, "-t", topic],
        ["topicClusterList", *n, "-t", topic],
        ["brokerStatus", *n, "-b", master],
        ["getBrokerConfig", *n, "-c", "ClusterB"],
        ["getNamesrvConfig", *n],
    ]
    create = [["updateTopic", *n, "-c", "ClusterA", "-t", "ADMIN_T", "-r", "2", "-w", "2"]]
    writes = [
        ["topicRoute", *n, "-t", "ADMIN_T"],
        ["wipeWritePerm", *n, "-b", "broker-a"],
        ["topicRoute", *n, "-t", topic],
        ["addWritePerm", *n, "-b", "broker-a"],
        ["topicRoute", *n, "-t", topic],
        ["updateKvConfig", *n, "-s", "ADMIN_NS", "-k", "key1", "-v", "value1"],
        ["updateKvConfig", *n, "-s", "ORDER_TOPIC_CONFIG", "-k", "ADMIN_T", "-v", "broker-a:2"],
        ["updateOrderConf", *n, "-t", "ADMIN_T", "-m", "get"],
        ["topicRoute", *n, "-t", "ADMIN_T"],
        ["deleteKvConfig", *n, "-s", "ORDER_TOPIC_CONFIG", "-k", "ADMIN_T"],
        ["deleteKvConfig", *n, "-s", "ADMIN_NS", "-k", "key1"],
        ["updateOrderConf", *n, "-t", "ADMIN_T", "-m", "get"],
        ["updateNamesrvConfig", *n, "-k", "orderMessageEnable", "-v", "true"],
        ["topicRoute", *n, "-t", "ADMIN_T"],
        ["updateNamesrvConfig", *n, "-k", "orderMessageEnable", "-v", "false"],
        ["topicList", *n],
    ]
    return [reads, create, writes]


def _normalise(out: str, dep: Deployment, ns: str) -> str:
    for addr in [*dep.namesrv_all.split(";"), ns]:  # every NameServer address (brokers' namesrvAddr names all)
        out = out.replace(addr, "<namesrv>")
    out = TIMESTAMP.sub("<time>", out)
    out = out.replace(FAQ_BEFORE_5_1, faq.DEFAULT_FAQ_URL)  # the URL only: "See …" and "For more information" differ
    lines = []
    for line in out.splitlines():
        if LOG_LINE.match(line):
            continue  # the tool's own logging (WARN and up)
        if line.startswith(("ClusterA ", "ClusterB ")):  # clusterList: live TPS, load and uptime columns
            line = " ".join(line.split()[:5])
        elif re.match(r"^[a-zA-Z]+(_/\S+)?\s*:\s", line):  # brokerStatus: key (or key_storePath) : live counter
            line = line.split(":", 1)[0].strip()
        lines.append(line.rstrip())
    return "\n".join(lines)


def _config(out: str) -> dict[str, str]:
    """getNamesrvConfig's `key = value` lines (under the address line)."""
    pairs = (ln.split("=", 1) for ln in out.splitlines() if "=" in ln)
    return {k.strip(): v.strip() for k, v in pairs}


def _compare(dep: Deployment, cmds: list[list[str]], ours: list[str], apache: list[str]) -> None:
    ours_ns, apache_ns = dep.ours.addr(), dep.apache.addr
    for cmd, a, b in zip(cmds, ours, apache, strict=True):
        assert "Exception" not in a or "Exception" in b, f"{cmd[0]}: ours failed where Apache's did not:\n{a}"
        if cmd[0] == "getNamesrvConfig":
            # a documented deviation: our settings, not NamesrvConfig's; the switches both have must agree
            mine, theirs = _config(a), _config(b)
            both = [k for k in SHARED_SWITCHES if k in theirs]  # 4.9's NamesrvConfig has fewer of them
            assert "orderMessageEnable" in both, b
            assert {k: mine.get(k) for k in both} == {k: theirs[k] for k in both}, (a, b)
            continue
        mine, theirs = _normalise(a, dep, ours_ns), _normalise(b, dep, apache_ns)
        if cmd[0] in ("topicList", "getBrokerConfig"):  # sets and Properties the tool prints in hash order
            mine, theirs = sorted(mine.splitlines()), sorted(theirs.splitlines())
        elif cmd[0] == "topicRoute" and mine.startswith("{"):  # the same: brokers and queues in hash order
            mine, theirs = (_standard(fastjson.loads(x), dep.line) for x in (mine, theirs))
        if mine != theirs:
            lines = [x if isinstance(x, list) else str(x).splitlines() for x in (theirs, mine)]
            diff = "\n".join(difflib.unified_diff(*lines, "Apache's", "ours", lineterm=""))
            raise AssertionError(f"mqadmin {' '.join(cmd)}: the output differs\n{diff[:6000]}")


SHARED_SWITCHES = ("orderMessageEnable", "deleteTopicWithBrokerRegistration", "supportActingMaster",
                   "enableAllTopicList", "enableTopicList", "waitSecondsForService")


def test_mqadmin_answers_as_against_apaches_nameserver(deployment: Deployment):
    deployment.create_topic("MQADMIN_T", "ClusterA", "ClusterB")
    rmq.wait_until(lambda: _apache_route(deployment, "MQADMIN_T") and len(deployment.ours.route("MQADMIN_T")
                                                                           ["queueDatas"]) == 2, 60,
                   "MQADMIN_T registered by both clusters with both NameServers")
    ours_ns, apache_ns = deployment.ours.addr(), deployment.apache.addr
    for phase, (mine, theirs) in enumerate(zip(_phases(deployment, ours_ns), _phases(deployment, apache_ns),
                                                strict=True)):
        ours = deployment.clients.mqadmin(mine)
        apache = deployment.clients.mqadmin(theirs)
        _compare(deployment, mine, ours, apache)
        if phase == 1:  # the new topic registered with both before phase 3 reads it
            rmq.wait_until(lambda: deployment.ours.route("ADMIN_T") and _apache_route(deployment, "ADMIN_T"), 60,
                           "ADMIN_T registered with both NameServers")
    # the writes landed in the shared registry: any worker answers them
    route = http_json(deployment.ours.url(1) + "/v1/topics/ADMIN_T/route")
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [2]
