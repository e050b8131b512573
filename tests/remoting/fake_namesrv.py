"""A tiny asyncio NameServer stand-in built on service.remoting: canned answers, every request recorded.

It exists to exercise the codec against a real client (tests/remoting/js/probe.js) before the real door exists.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from service.remoting import bodies, fastjson, signature
from service.remoting.codec import FrameDecoder, FrameError, RemotingCommand, encode, is_oneway, make_response

SUCCESS, SYSTEM_ERROR, REQUEST_CODE_NOT_SUPPORTED, NO_PERMISSION, TOPIC_NOT_EXIST, QUERY_NOT_FOUND = 0, 1, 3, 16, 17, 22

# fastjson bean order (alphabetical); brokerAddrs keeps bare integer keys, as Java writes for versions < 401.
ROUTE_TOPIC_A: dict[str, Any] = {
    "brokerDatas": [
        {
            "brokerAddrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
            "brokerName": "broker-a",
            "cluster": "DefaultCluster",
            "enableActingMaster": False,
        }
    ],
    "filterServerTable": {},
    "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}],
}
CLUSTER_INFO: dict[str, Any] = {
    "brokerAddrTable": {
        "broker-a": {
            "brokerAddrs": {0: "127.0.0.1:10911"},
            "brokerName": "broker-a",
            "cluster": "DefaultCluster",
            "enableActingMaster": False,
        }
    },
    "clusterAddrTable": {"DefaultCluster": ["broker-a"]},
}


@dataclass
class Received:
    """One decoded request and what the fake made of it."""

    command: RemotingCommand
    signature_ok: bool | None = None  # None: no Signature field
    register_body: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class FakeNamesrv:
    """secrets maps AccessKey -> secret; when set, unsigned or badly signed requests get NO_PERMISSION."""

    secrets: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    frame_errors: list[str] = field(default_factory=list)
    kv: dict[tuple[str, str], str] = field(default_factory=dict)
    port: int = 0
    _server: asyncio.Server | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> FakeNamesrv:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        """Poll (no sleeps) until `count` requests have been recorded."""
        async with asyncio.timeout(timeout):
            while len(self.received) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return self.received

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                try:
                    commands = decoder.feed(data)
                except FrameError as exc:
                    self.frame_errors.append(f"{type(exc).__name__}: {exc}")
                    commands = exc.decoded
                    for cmd in commands:
                        self._answer(cmd, writer)
                    break
                for cmd in commands:
                    self._answer(cmd, writer)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, cmd: RemotingCommand, writer: asyncio.StreamWriter) -> None:
        entry = Received(cmd)
        self.received.append(entry)
        self._arrived.set()
        response = self._respond(cmd, entry)
        if not is_oneway(cmd) and response is not None:
            writer.write(encode(response))

    def _respond(self, cmd: RemotingCommand, entry: Received) -> RemotingCommand | None:
        ext = cmd.ext_fields
        if signature.SIGNATURE in ext:
            secret = self.secrets.get(ext.get(signature.ACCESS_KEY, ""), "")
            entry.signature_ok = signature.verify(ext, cmd.body, secret)
        if self.secrets and not entry.signature_ok:
            return make_response(cmd, NO_PERMISSION, "signature check failed")
        if cmd.code == 105:
            if ext.get("topic") != "TopicA":
                remark = f"No topic route info in name server for the topic: {ext.get('topic')}"
                return make_response(cmd, TOPIC_NOT_EXIST, remark)
            standard = cmd.version >= 401 or ext.get("acceptStandardJsonOnly") == "true"
            return make_response(cmd, SUCCESS, body=fastjson.dumps(ROUTE_TOPIC_A, standard=standard))
        if cmd.code == 106:
            return make_response(cmd, SUCCESS, body=fastjson.dumps(CLUSTER_INFO))
        if cmd.code == 103:
            crc = int(ext.get("bodyCrc32") or 0)
            if crc and crc != bodies.crc32_of(cmd.body):
                return make_response(cmd, SYSTEM_ERROR, "crc32 not match")
            try:
                entry.register_body = bodies.decode_register_broker_body(
                    cmd.body, ext.get("compressed") == "true", cmd.version
                )
            except bodies.BodyError as exc:
                entry.error = str(exc)
                return make_response(cmd, SYSTEM_ERROR, str(exc))
            return make_response(cmd, SUCCESS)
        if cmd.code in (104, 904):
            return make_response(cmd, SUCCESS)
        if cmd.code == 322:
            version = bodies.decode_data_version(cmd.body)
            return make_response(cmd, SUCCESS, ext={"changed": True}, body=fastjson.dumps(version))
        if cmd.code == 100:
            self.kv[(ext.get("namespace", ""), ext.get("key", ""))] = ext.get("value", "")
            return make_response(cmd, SUCCESS)
        if cmd.code == 101:
            ns, key = ext.get("namespace", ""), ext.get("key", "")
            if (ns, key) in self.kv:
                return make_response(cmd, SUCCESS, ext={"value": self.kv[(ns, key)]})
            return make_response(cmd, QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return make_response(cmd, REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
