"""The network between the emulator and one client: a fixed one-way delay each way, in order.

Each direction is a FIFO stamped on entry: a frame leaves ``delay`` seconds after it entered,
and never before the frame ahead of it, so the delay adds latency without costing throughput
and frame order is kept per connection. Pure bookkeeping and one writer loop; the connection
owns the tasks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from websockets.exceptions import ConnectionClosed

_Frame = str | bytes


@dataclass
class _Item:
    due: float
    frame: _Frame
    done: asyncio.Future[bool]


class Outbound:
    """Server frames on their way to the client.

    ``put`` never waits; its future says whether the frame was written (False when the
    connection was dropped or closed first). ``run`` is the writer loop.
    """

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._items: deque[_Item] = deque()
        self._ready = asyncio.Event()
        self._empty = asyncio.Event()
        self._empty.set()
        self._broken = False

    @property
    def idle(self) -> bool:
        """Nothing is queued: a frame written now would not overtake one."""
        return not self._items

    def put(self, frame: _Frame) -> asyncio.Future[bool]:
        """Queue ``frame``; the future resolves once it was written (or will never be)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        if self._broken:
            done.set_result(False)
            return done
        self._items.append(_Item(loop.time() + self._delay, frame, done))
        self._empty.clear()
        self._ready.set()
        return done

    def break_(self) -> None:
        """The connection is gone: nothing queued (or queued later) is written."""
        self._broken = True
        while self._items:
            item = self._items.popleft()
            if not item.done.done():
                item.done.set_result(False)
        self._empty.set()

    async def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every queued frame was written or abandoned."""
        try:
            await asyncio.wait_for(self._empty.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def run(self, send: Callable[[_Frame], Awaitable[None]]) -> None:
        """Write each frame when it is due with ``send`` (the socket's), until cancelled or
        the socket closes."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self._items:
                    self._empty.set()
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                item = self._items[0]
                wait = item.due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self._broken:
                    continue
                self._items.popleft()
                written = False
                try:
                    await send(item.frame)
                    written = True
                except ConnectionClosed:
                    return
                finally:
                    item.done.set_result(written)
        finally:
            self.break_()


class Inbound:
    """Client frames on their way to the emulator: stamped when read, handed out when due."""

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._queue: asyncio.Queue[tuple[float, _Frame | BaseException]] = asyncio.Queue()

    def arrived(self, frame: _Frame | BaseException) -> None:
        """``frame`` was read from the socket now (an exception: the socket ended with it)."""
        self._queue.put_nowait((asyncio.get_running_loop().time() + self._delay, frame))

    async def next(self) -> _Frame:
        """The next frame, once it is due; raises what ended the socket after the last one."""
        due, frame = await self._queue.get()
        wait = due - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)
        if isinstance(frame, BaseException):
            raise frame
        return frame
