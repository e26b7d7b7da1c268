"""A TCP proxy on 127.0.0.1 that delays every byte by half a round trip each way, in order.

It stands for the network between a client and the service: unlike a delay inside the server,
it delays everything on the wire, TLS records and WebSocket control frames (pings and pongs)
included, so a client that measures the round trip by pinging sees the delay its data sees.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

_CHUNK = 65536


class DelayProxy:
    """Forwards connections to ``target_port`` with ``round_trip / 2`` added each way."""

    def __init__(self, target_port: int, round_trip: float) -> None:
        self._target = target_port
        self._delay = round_trip / 2
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def __aenter__(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()  # the pipes see the end and finish
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        await self._server.wait_closed()

    def _own(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._own(task)  # type: ignore[arg-type]
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(w.wait_closed(), 1)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Bytes read now are written ``delay`` later, in order; EOF travels the same way."""
        loop = asyncio.get_running_loop()
        queue: deque[tuple[float, bytes]] = deque()
        ready = asyncio.Event()

        async def deliver() -> None:
            while True:
                while not queue:
                    ready.clear()
                    await ready.wait()
                due, data = queue.popleft()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                try:
                    writer.write(data)
                    await writer.drain()
                except OSError:
                    return

        sender = asyncio.create_task(deliver())
        try:
            while True:
                data = await reader.read(_CHUNK)
                queue.append((loop.time() + self._delay, data))
                ready.set()
                if not data:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            await asyncio.wait({sender})
