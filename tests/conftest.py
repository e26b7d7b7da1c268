"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from realtime_resumption.gemini.endpoints import ENDPOINTS
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.testing.redis_server import RedisServer


@pytest.fixture(autouse=True)
def _forget_endpoints() -> Iterator[None]:
    """Each test's emulators start unknown: an emulator on a port an earlier test's used
    must not inherit what the process learned about that one."""
    ENDPOINTS.forget()
    yield
    ENDPOINTS.forget()


@pytest.fixture
async def redis_gone_store(tmp_path: Path) -> AsyncIterator[RedisStore]:
    """A store whose Redis server has stopped: every command fails within its bound."""
    async with RedisServer(tmp_path) as redis:
        store = RedisStore(url=redis.url)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    """A real redis-server, started for the test and stopped after it."""
    server = RedisServer(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def redis_store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` on the test's redis-server."""
    store = RedisStore(url=redis_server.url)
    try:
        yield store
    finally:
        await store.close()
