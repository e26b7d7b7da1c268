"""Fixtures for the store tests: a real Redis server per test, a real Redis Cluster shared by
them (emptied for each), and the stores on them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from redis import asyncio as aioredis

from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import MemoryStore, SessionStore
from realtime_resumption.testing.redis_server import RedisClusterServers, RedisServer

from ..transport.transport_helpers import ScriptedServer


class Clock:
    """An injected clock for the in-memory store."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# One cluster for the session: a cluster's primaries wait about two seconds after they start
# before they take writes, too long to pay per test.
@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def redis_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[RedisClusterServers]:
    cluster = RedisClusterServers(tmp_path_factory.mktemp("redis-cluster"))
    try:
        await cluster.start()
        yield cluster
    finally:
        await cluster.stop()


def cluster_client(cluster: RedisClusterServers) -> Any:
    """A new client of ``cluster`` (the caller closes it)."""
    return aioredis.RedisCluster(
        host="127.0.0.1", port=cluster.port, socket_timeout=1.0, socket_connect_timeout=1.0
    )


@pytest.fixture
async def cluster_store(redis_cluster: RedisClusterServers) -> AsyncIterator[RedisStore]:
    """A store on the cluster, emptied first."""
    client = cluster_client(redis_cluster)
    await client.flushall(target_nodes=aioredis.RedisCluster.PRIMARIES)
    store = RedisStore(client=client)
    try:
        yield store
    finally:
        await store.close()
        await client.aclose()


@dataclass
class RedisUnderTest:
    """A store on a real Redis (one server or a cluster), and a way to reach that Redis
    directly."""

    store: RedisStore
    connect: Callable[[], Any]
    """A new client of that Redis (the caller closes it)."""


@pytest.fixture(params=["server", "cluster"])
def redis_under_test(request: pytest.FixtureRequest) -> RedisUnderTest:
    if request.param == "server":
        server: RedisServer = request.getfixturevalue("redis_server")
        store: RedisStore = request.getfixturevalue("redis_store")
        return RedisUnderTest(store, lambda: aioredis.Redis.from_url(server.url))
    cluster: RedisClusterServers = request.getfixturevalue("redis_cluster")
    store = request.getfixturevalue("cluster_store")
    return RedisUnderTest(store, lambda: cluster_client(cluster))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "redis", "redis-cluster"])
def store(request: pytest.FixtureRequest, clock: Clock) -> SessionStore:
    if request.param == "memory":
        return MemoryStore(clock)
    redis: RedisStore = request.getfixturevalue(
        "redis_store" if request.param == "redis" else "cluster_store"
    )
    return redis


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
