"""Answers the differential tier (tests/differential, Apache's NameServer 5.5.0 as the oracle) found different,
pinned here at unit level: requests missing a header field Java does not need, and Java's remarks."""

from __future__ import annotations

from service.remoting import codes, fastjson
from tests.remoting.test_door import BROKER, QUERY_NOT_FOUND, SUCCESS, SYSTEM_ERROR, register, register_ext

NS = {"namespace": "NS1"}


async def test_kv_requests_missing_namespace_or_key_answer_as_java(door):
    c = await door.client()
    r = await c.request(codes.PUT_KV_CONFIG, {"key": "k", "value": "v"})
    assert (r.code, r.remark) == (SYSTEM_ERROR, "namespace or key is null")
    r = await c.request(codes.PUT_KV_CONFIG, {**NS, "value": "v"})
    assert (r.code, r.remark) == (SYSTEM_ERROR, "namespace or key is null")
    r = await c.request(codes.GET_KV_CONFIG, {"key": "k"})
    assert (r.code, r.remark) == (QUERY_NOT_FOUND, "No config item, Namespace: null Key: k")
    r = await c.request(codes.GET_KV_CONFIG, NS)
    assert (r.code, r.remark) == (QUERY_NOT_FOUND, "No config item, Namespace: NS1 Key: null")
    r = await c.request(codes.GET_KVLIST_BY_NAMESPACE, {})
    assert (r.code, r.remark) == (QUERY_NOT_FOUND, "No config item, Namespace: null")
    assert (await c.request(codes.DELETE_KV_CONFIG, NS)).code == SUCCESS
    assert (await c.request(codes.DELETE_KV_CONFIG, {"key": "k"})).code == SUCCESS
    assert await door.ns.store.kv_namespaces() == []  # nothing was written


async def test_admin_and_list_requests_missing_their_name_change_nothing(door):
    c = await door.client()
    await register(c)
    version = await door.ns.store.version()
    r = await c.request(codes.WIPE_WRITE_PERM_OF_BROKER, {})
    assert (r.code, r.ext_fields) == (SUCCESS, {"wipeTopicCount": "0"})
    r = await c.request(codes.ADD_WRITE_PERM_OF_BROKER, {})
    assert (r.code, r.ext_fields) == (SUCCESS, {"addTopicCount": "0"})
    assert (await c.request(codes.DELETE_TOPIC_IN_NAMESRV, {})).code == SUCCESS
    queue = {"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0, "writeQueueNums": 2}
    r = await c.request(codes.REGISTER_TOPIC_IN_NAMESRV, {}, fastjson.dumps({"queueDatas": [queue]}))
    assert r.code == SUCCESS
    assert await door.ns.store.version() == version  # nothing was written
    r = await c.request(codes.GET_TOPICS_BY_CLUSTER, {})
    assert (r.code, fastjson.loads(r.body)) == (SUCCESS, {"topicList": []})
    await c.request(codes.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=false\n")
    r = await c.request(codes.GET_TOPICS_BY_CLUSTER, {})
    assert r.code == SYSTEM_ERROR and r.remark.startswith("disable")  # the switch is checked first, as Java


async def test_member_group_keeps_javas_default_remark_and_echoes_what_was_sent(door):
    c = await door.client()
    await register(c)
    r = await c.request(codes.GET_BROKER_MEMBER_GROUP, {"clusterName": "C1", "brokerName": "broker-a"})
    assert (r.code, r.remark) == (SUCCESS, "not set any response code")
    assert fastjson.loads(r.body)["brokerMemberGroup"]["brokerAddrs"] == {0: "10.0.0.1:10911"}
    r = await c.request(codes.GET_BROKER_MEMBER_GROUP, {"brokerName": "broker-a"})  # found by name alone
    assert (r.code, r.remark) == (SUCCESS, "not set any response code")
    assert fastjson.loads(r.body) == {"brokerMemberGroup": {"brokerAddrs": {0: "10.0.0.1:10911"},
                                                            "brokerName": "broker-a"}}
    r = await c.request(codes.GET_BROKER_MEMBER_GROUP, {"clusterName": "C1"})
    assert fastjson.loads(r.body) == {"brokerMemberGroup": {"brokerAddrs": {}, "cluster": "C1"}}


async def test_unregister_without_broker_id_removes_nothing(door):
    """Java answers SUCCESS, then its unregister thread fails on the null id: the broker stays."""
    c = await door.client()
    await register(c)
    version = await door.ns.store.version()
    ident = {k: v for k, v in BROKER.items() if k != "brokerId"}
    assert (await c.request(codes.UNREGISTER_BROKER, ident)).code == SUCCESS
    assert await door.ns.store.version() == version
    assert (await c.request(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).code == SUCCESS


async def test_data_version_and_heartbeat_need_no_broker_name(door):
    c = await door.client()
    await register(c)
    dv = fastjson.dumps({"counter": 1, "stateVersion": 0, "timestamp": 1700000000000})
    no_name = {k: v for k, v in BROKER.items() if k != "brokerName"}
    r = await c.request(codes.QUERY_DATA_VERSION, no_name, dv)  # found by (clusterName, brokerAddr), as Java
    assert (r.code, r.ext_fields) == (SUCCESS, {"changed": "false"})
    r = await c.request(codes.QUERY_DATA_VERSION, {**no_name, "brokerAddr": "10.9.9.9:1"}, dv)
    assert (r.code, r.ext_fields) == (SUCCESS, {"changed": "true"})
    assert (await c.request(codes.BROKER_HEARTBEAT, {"clusterName": "C1", "brokerAddr": "10.0.0.1:10911"})).code == 0
    # Java fails on a null brokerAddr (NullPointerException): SYSTEM_ERROR, as ours
    r = await c.request(codes.BROKER_HEARTBEAT, {"clusterName": "C1", "brokerName": "broker-a"})
    assert r.code == SYSTEM_ERROR


async def test_broker_calls_missing_an_identity_field_are_still_refused(door):
    """docs/deviations.md: Java files such a broker under a null name or cluster; we refuse, naming the field."""
    c = await door.client()
    for field in ("brokerName", "brokerAddr", "clusterName", "brokerId"):
        ext = {k: v for k, v in register_ext().items() if k != field}
        r = await c.request(codes.REGISTER_BROKER, ext, b"")
        assert r.code == SYSTEM_ERROR and field in r.remark
    r = await c.request(codes.PUT_KV_CONFIG, {**NS, "key": "k"})
    assert r.code == SYSTEM_ERROR and "value" in r.remark
