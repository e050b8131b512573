"""kvConfig.json as `namesrv admin kv import` reads it and `kv export` writes it, without a server: what Apache's
NameServer writes (fastjson, compact, non-ASCII as UTF-8) is read whole; a malformed file is refused with its line
and column; the plan a dry run prints."""

from __future__ import annotations

import pytest

from service.admin.client import AdminError
from service.admin.kv_migrate import kv_file_text, parse_kv_file, plan_text

# What KVConfigManager.persist writes (fastjson 1.2.x JSON.toJSONString, not pretty): HashMap order, non-ASCII raw,
# control characters escaped, an emptied namespace as {}.
FASTJSON = ('{"configTable":{"MIG_NS":{"k k":"v\\tw","键":"值"},"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4;'
            'broker-b:4"},"Emptied":{}}}').encode()


def test_a_file_as_java_writes_it_reads_whole_and_writes_back_equal():
    table = parse_kv_file(FASTJSON, "f")
    assert table == {"MIG_NS": {"k k": "v\tw", "键": "值"}, "ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4;broker-b:4"},
                     "Emptied": {}}
    text = kv_file_text(table)
    assert text == ('{"configTable":{"Emptied":{},"MIG_NS":{"k k":"v\\tw","键":"值"},"ORDER_TOPIC_CONFIG":'
                    '{"TopicA":"broker-a:4;broker-b:4"}}}')
    assert parse_kv_file(text.encode(), "f") == table
    assert parse_kv_file(b"\xef\xbb\xbf" + FASTJSON, "f") == table  # a byte-order mark an editor added


@pytest.mark.parametrize(("raw", "message"), [
    (b"", "f: the file is empty"),
    (b"  \n", "f: the file is empty"),
    (b'{"configTable":{"A":{"k":"v",}}}', "f: line 1 column 30: Expecting property name enclosed in double quotes "
                                          "(not the JSON Apache's NameServer writes)"),
    (b'{"configTable":{\n  "A":{"k":"v"', "f: line 2 column 15: Expecting ',' delimiter (the file ends before its "
                                          "JSON does: cut short?)"),
    (b"{'configTable':{}}", "f: line 1 column 2: Expecting property name enclosed in double quotes"),
    (b'{"configTable":{"A":{"k":"v","k":"w"}}}', 'f: "k" appears twice in one object'),
    (b'{"configTable":{"A":{"k":"caf\xe9"}}}', "f: line 1 column 30 (byte 29): not utf-8 (0xe9)"),
    (b'{"configTable":{"A":{}},\n"x":\xff}', "f: line 2 column 5 (byte 29): not utf-8 (0xff)"),
    (b'{"namespaces":{}}', "f: no configTable"),
    (b"{}", "f: no configTable"),
    (b'{"configTable":{},"dataVersion":1}', "f: unexpected field(s) 'dataVersion' beside configTable"),
    (b"[1,2]", "f: no configTable"),
])
def test_a_malformed_file_is_refused_saying_where(raw, message):
    with pytest.raises(AdminError) as e:
        parse_kv_file(raw, "f")
    assert e.value.exit_code == 2 and e.value.message.startswith(message), e.value.message


def test_entries_the_server_cannot_take_are_each_named(capsys):
    with pytest.raises(AdminError) as e:
        parse_kv_file(b'{"configTable":{"A":{"k\\n":"v","ok":"v"},"B":[],"C":{"n":5}}}', "f")
    assert e.value.message == "f: 3 entries cannot be taken (listed above; docs/deviations.md, KV), nothing was written"
    assert capsys.readouterr().err.splitlines() == [
        '  namespace A key "k\\n": key: control character U+000A at position 1 (any other text is allowed)',
        "  namespace B: an object {key: value} is required, not list",
        "  namespace C key n: value: required, a string"]


def test_the_plan_shows_each_change_and_names_unclear_names_quoted():
    res = {"dryRun": True, "replace": True, "totals": {"namespacesCreated": 1, "added": 1, "changed": 1,
                                                       "unchanged": 2, "removed": 1, "kept": 0},
           "namespaces": [{"namespace": "NS", "created": False, "added": {" pad ": "v" * 100},
                           "changed": {"k": {"before": "1", "after": ""}}, "unchanged": ["a", "b"],
                           "removed": {"\u200bz": "x"}, "kept": []},
                          {"namespace": "New", "created": True, "added": {}, "changed": {}, "unchanged": [],
                           "removed": {}, "kept": []}]}
    assert plan_text(res, "f.json", "http://h:8080", asked_dry=True).splitlines() == [
        "KV dry run: f.json -> http://h:8080",
        "NS", '  + " pad " = ' + "v" * 79 + "…", '  ~ k: 1 -> ""', '  - "\u200bz" (was x)', "  = 2 unchanged",
        "New (new namespace, empty)",
        "2 namespace(s), 1 new; keys: 1 added, 1 changed, 1 removed, 2 unchanged, 0 kept",
        "dry run: nothing written"]
