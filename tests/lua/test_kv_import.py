"""A whole KV config in one script (kvImport-2) and read at one instant (kvExport-1), on fakeredis and a real
redis-server: what each namespace held before comes from the same script as the write, a dry run writes nothing,
ORDER_TOPIC_CONFIG changes are published once, and an import larger than one HSET's worth is written whole."""

from __future__ import annotations

from service.store.keys import ORDER_TOPIC_CONFIG
from tests.lua.test_scenarios import Changes


async def test_merge_adds_changes_and_keeps(store):
    await store.kv_put("NS", "keep", "1")
    await store.kv_put("NS", "same", "2")
    await store.kv_put("NS", "old", "3")
    before = await store.kv_import({"NS": {"same": "2", "old": "4", "new": "5"}, "Empty": {}, "键": {"k v": "值"}},
                                   replace=False, dry_run=False)
    assert before == {"NS": (True, {"keep": "1", "same": "2", "old": "3"}), "Empty": (False, {}), "键": (False, {})}
    assert await store.kv_list("NS") == {"keep": "1", "same": "2", "old": "4", "new": "5"}
    assert await store.kv_list("Empty") == {}  # an empty namespace exists, as Java's empty map
    assert await store.kv_export() == {"Empty": {}, "NS": {"keep": "1", "same": "2", "old": "4", "new": "5"},
                                       "键": {"k v": "值"}}
    assert await store.kv_export(["NS", "missing"]) == {"NS": {"keep": "1", "same": "2", "old": "4", "new": "5"}}


async def test_replace_removes_what_the_import_lacks_and_keeps_the_namespace(store):
    await store.kv_put("NS", "a", "1")
    await store.kv_put("NS", "b", "2")
    await store.kv_put("Other", "x", "y")
    await store.kv_import({"NS": {"b": "3"}}, replace=True, dry_run=False)
    assert await store.kv_export() == {"NS": {"b": "3"}, "Other": {"x": "y"}}  # namespaces not imported: untouched
    await store.kv_import({"NS": {}}, replace=True, dry_run=False)
    assert await store.kv_export() == {"NS": {}, "Other": {"x": "y"}}


async def test_a_dry_run_writes_nothing_and_answers_as_the_write_would(store):
    await store.kv_put(ORDER_TOPIC_CONFIG, "T1", "b:4")
    table = {ORDER_TOPIC_CONFIG: {"T1": "b:8", "T2": "b:4"}, "New": {"k": "v"}}
    version = await store.version()
    keys = sorted(await store.redis.keys(store.keys.base + "*"))
    async with Changes(store) as changes:
        dry = await store.kv_import(table, replace=True, dry_run=True)
        assert await changes.take() == []
    assert await store.version() == version and sorted(await store.redis.keys(store.keys.base + "*")) == keys
    assert dry == await store.kv_import(table, replace=True, dry_run=False)


async def test_order_topic_changes_are_published_once_and_only_for_topic_names(store):
    await store.kv_put(ORDER_TOPIC_CONFIG, "T1", "b:4")
    await store.kv_put(ORDER_TOPIC_CONFIG, "Gone", "b:4")
    async with Changes(store) as changes:
        await store.kv_import({ORDER_TOPIC_CONFIG: {"T1": "b:4", "T2": "b:8", "=x": "1"}, "NS": {"T3": "z"}},
                              replace=True, dry_run=False)
        # T1 unchanged, T2 added, Gone removed; "=x" is no topic name; other namespaces change no route
        ver, named = await changes.one()
        assert named == {"T2", "Gone", "!*"}
        await store.kv_import({ORDER_TOPIC_CONFIG: {"T1": "b:4", "T2": "b:8", "=x": "1"}}, replace=True,
                              dry_run=False)
        await store.kv_import({"NS": {"T3": "other"}}, replace=False, dry_run=False)
        assert await changes.take() == []  # nothing changed in ORDER_TOPIC_CONFIG: nothing published
    assert await store.version() == ver


async def test_a_large_import_is_written_whole(store):
    table = {ORDER_TOPIC_CONFIG: {f"Topic{i}": f"broker-{i % 7}:8" for i in range(5_000)},
             "NS": {f"k{i}": "v" * (i % 50) for i in range(2_500)}}
    before = await store.kv_import(table, replace=False, dry_run=False)
    assert before == {ORDER_TOPIC_CONFIG: (False, {}), "NS": (False, {})}
    assert await store.kv_export() == table
    keep = {ORDER_TOPIC_CONFIG: dict(list(table[ORDER_TOPIC_CONFIG].items())[:10])}
    await store.kv_import(keep, replace=True, dry_run=False)  # 4 990 deletions, past one HDEL's worth
    assert await store.kv_list(ORDER_TOPIC_CONFIG) == keep[ORDER_TOPIC_CONFIG]
