"""A small asyncio RocketMQ remoting client on our codec, for tests: requests matched to replies by opaque."""

from __future__ import annotations

import asyncio
import itertools
import ssl
from typing import Any

from service.remoting.codec import FrameDecoder, RemotingCommand, encode

FLAG_ONEWAY = 2


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.opaques = itertools.count(1)
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.received: list[RemotingCommand] = []
        self._task = asyncio.create_task(self._read())
        self.closed = asyncio.Event()

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1", ssl_ctx: ssl.SSLContext | None = None) -> Client:
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_ctx)
        return cls(reader, writer)

    async def _read(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for cmd in self.decoder.feed(data):
                    self.received.append(cmd)
                    fut = self.pending.get(cmd.opaque)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed.set()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionResetError("connection closed"))

    def send(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", *, version: int = 479,
             serialize: str = "JSON", oneway: bool = False, opaque: int | None = None) -> int:
        opaque = next(self.opaques) if opaque is None else opaque
        cmd = RemotingCommand(code=code, language="JAVA", version=version, opaque=opaque,
                              flag=FLAG_ONEWAY if oneway else 0,
                              ext_fields={k: str(v).lower() if isinstance(v, bool) else str(v)
                                          for k, v in (ext or {}).items() if v is not None},
                              body=body, serialize_type=serialize)
        if not oneway:
            self.pending[opaque] = asyncio.get_running_loop().create_future()
        self.writer.write(encode(cmd))
        return opaque

    async def request(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
                      timeout: float = 10.0, **kw: Any) -> RemotingCommand:
        opaque = self.send(code, ext, body, **kw)
        async with asyncio.timeout(timeout):
            return await self.pending[opaque]

    async def reply_to(self, opaque: int, timeout: float = 10.0) -> RemotingCommand:
        async with asyncio.timeout(timeout):
            return await self.pending[opaque]

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
        self._task.cancel()
