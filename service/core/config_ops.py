"""The KV config and the NameServer's own config as a mixin of NameServer (nameserver.py), as Apache's
KVConfigManager and DefaultRequestProcessor's updateConfig/getConfig: KV reads and writes (a large import parsed
in the parser process), the settings in force and the runtime switches every worker shares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from service.config import BY_NAME, CONFIG_BLACKLIST, RUNTIME_NAMES, ConfigError, Settings, canonical_name, parse_value
from service.core.access import Access, Principal, Role
from service.core.bodies import OFFLOAD_BYTES, ParserPool, parse_kv_import
from service.core.route_cache import RouteCache
from service.errors import ConfigBlacklisted, InvalidArgument
from service.models import KvImportResult, KvTable, kv_name, kv_value
from service.store import RouteStore
from service.store.keys import ORDER_TOPIC_CONFIG


class ConfigOps:
    """KV and NameServer config, for a NameServer with `access`, `settings`, `store`, `routes`, its parser process
    (`_parsers`), `_changed` and `reload_shared_config`."""

    access: Access
    settings: Settings
    store: RouteStore
    routes: RouteCache
    _parsers: ParserPool
    _changed: Callable[[Iterable[str] | None], None]
    reload_shared_config: Callable[[], Awaitable[None]]

    def _changed_kv(self, namespaces: Iterable[str]) -> None:
        """A KV write: the order-topic table is in every answer to a registration."""
        if ORDER_TOPIC_CONFIG in namespaces:
            self._changed(None)
    # ------------------------------------------------------------------ KV config

    async def kv_put(self, who: Principal, namespace: str, key: str, value: str) -> None:
        self.access.require(who, Role.ADMIN)
        ns, k, v = kv_name(namespace, "namespace"), kv_name(key, "key"), kv_value(value)
        try:
            await self.store.kv_put(ns, k, v)
        finally:
            self._changed_kv([ns])

    async def kv_get(self, who: Principal, namespace: str, key: str) -> str:
        self.access.require(who, Role.READ)
        return await self.store.kv_get(kv_name(namespace, "namespace"), kv_name(key, "key"))

    async def kv_delete(self, who: Principal, namespace: str, key: str) -> bool:
        self.access.require(who, Role.ADMIN)
        ns, k = kv_name(namespace, "namespace"), kv_name(key, "key")
        try:
            return await self.store.kv_delete(ns, k)
        finally:
            self._changed_kv([ns])

    async def kv_list(self, who: Principal, namespace: str) -> KvTable:
        self.access.require(who, Role.READ)
        return KvTable(await self.store.kv_list(kv_name(namespace, "namespace")))

    async def kv_import(self, who: Principal, raw: bytes, decode: Callable[[bytes], Any]) -> KvImportResult:
        """A whole KV config written in one step (every namespace, or nothing: one entry that breaks a rule refuses
        the import, naming each such entry), or only compared with what is stored (`dryRun`, read role). The
        answer comes from the same script as the write: what the import changed, not what a read before it saw."""
        self.access.require(who, Role.READ)
        if len(raw) < OFFLOAD_BYTES:
            table, replace, dry_run = parse_kv_import(decode, raw)
        else:
            table, replace, dry_run = await self._parsers.run(parse_kv_import, decode, raw)
        if not dry_run:
            self.access.require(who, Role.ADMIN)
        try:
            before = await self.store.kv_import(table, replace=replace, dry_run=dry_run)
        finally:
            if not dry_run:
                self._changed_kv(table)
        return KvImportResult.of(table, before, dry_run=dry_run, replace=replace)

    async def kv_export(self, who: Principal, namespaces: list[str]) -> dict[str, dict[str, str]]:
        """The whole KV config at one instant, as Java's kvConfig.json holds it (emptied namespaces too), or only
        the namespaces named (those that exist)."""
        self.access.require(who, Role.READ)
        return await self.store.kv_export([kv_name(n, "namespace") for n in namespaces])

    async def kv_namespaces(self, who: Principal) -> list[str]:
        """The KV namespaces, sorted (no RocketMQ code: Java has no way to list them)."""
        self.access.require(who, Role.READ)
        return await self.store.kv_namespaces()

    # ------------------------------------------------------------------ NameServer config

    def config_view(self, who: Principal) -> dict[str, Any]:
        """Every setting in force (secrets and URL passwords masked), sorted by name."""
        self.access.require(who, Role.ADMIN)
        return dict(sorted(self.settings.masked().items()))

    async def update_config(self, who: Principal, changes: Mapping[str, Any]) -> dict[str, str]:
        """Change runtime switches for every worker (kept in Redis). Blacklisted keys (paths, secrets; cf.
        CVE-2023-37582) are refused as a whole; start-up settings and unknown names are refused too."""
        self.access.require(who, Role.ADMIN)
        if not changes:
            raise InvalidArgument("at least one setting")
        parsed: dict[str, str] = {}
        for key, raw in changes.items():
            flat = key.replace("_", "").replace("-", "").lower()
            if flat.removeprefix("namesrv") in CONFIG_BLACKLIST or flat in CONFIG_BLACKLIST:
                raise ConfigBlacklisted(f"Can not update config in black list: {key}")
            name = canonical_name(key)
            if name is None:
                raise InvalidArgument(f"unknown setting {key!r}", field=key)
            setting = BY_NAME[name]
            if setting.secret or "path" in name:
                raise ConfigBlacklisted(f"Can not update config in black list: {key}")
            if not setting.runtime:
                raise InvalidArgument(f"{key!r} is a start-up setting; change it in the deployment", field=key)
            if isinstance(raw, dict | list) or raw is None:
                raise InvalidArgument(f"{key}: a scalar value", field=key)
            try:
                value = parse_value(setting, raw)
            except ConfigError as exc:
                raise InvalidArgument(str(exc), field=key) from None
            parsed[name] = str(value).lower() if isinstance(value, bool) else str(value)
        await self.store.put_runtime_config(parsed)
        await self.reload_shared_config()
        self.routes.flush()
        return parsed

    @property
    def runtime_names(self) -> tuple[str, ...]:
        return RUNTIME_NAMES
