"""Fixtures for the store tests: a real Redis server per test, and both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import MemoryStore, SessionStore
from realtime_resumption.testing.redis_server import RedisServer

from ..transport.transport_helpers import ScriptedServer


class Clock:
    """An injected clock for the in-memory store."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def redis_store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    store = RedisStore(url=redis_server.url)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest, clock: Clock) -> SessionStore:
    if request.param == "memory":
        return MemoryStore(clock)
    redis: RedisStore = request.getfixturevalue("redis_store")
    return redis


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
