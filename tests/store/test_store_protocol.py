"""The ``SessionStore`` contract, against the in-memory store, a real Redis server and a real
Redis Cluster (three primaries sharing the slots)."""

from __future__ import annotations

import asyncio

import pytest
from redis import asyncio as aioredis

from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import MemoryStore, SessionStore, StoreError
from realtime_resumption.testing.redis_server import RedisServer

from .conftest import Clock, RedisUnderTest

KEY = "room-42"


async def test_a_saved_record_loads_back_and_deleted_is_gone(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)
    assert await store.load(KEY) is None
    assert await store.save(KEY, b"\x00record\xff", 60)
    assert await store.load(KEY) == [b"\x00record\xff"]
    assert await store.save(KEY, b"newer", 60)
    assert await store.load(KEY) == [b"newer"]
    assert await store.load("another") is None
    await store.delete(KEY)
    assert await store.load(KEY) is None


async def test_one_lease_per_key_renewed_and_released_only_by_its_owner(
    store: SessionStore,
) -> None:
    assert await store.acquire(KEY, "a", 30)
    assert not await store.acquire(KEY, "b", 30)
    assert await store.acquire(KEY, "a", 30)  # its own lease: renewed
    assert await store.acquire("other-room", "b", 30)
    assert not await store.renew(KEY, "b", 30)
    assert not await store.release(KEY, "b")
    assert not await store.acquire(KEY, "b", 30)
    assert await store.renew(KEY, "a", 30)
    assert await store.release(KEY, "a")
    assert not await store.release(KEY, "a")
    assert not await store.renew(KEY, "a", 30)
    assert await store.acquire(KEY, "b", 30)


async def test_a_fenced_save_writes_only_under_the_callers_lease(store: SessionStore) -> None:
    assert not await store.save(KEY, b"no lease", 60, lease="a")
    assert await store.load(KEY) is None
    assert await store.acquire(KEY, "a", 30)
    assert not await store.save(KEY, b"not mine", 60, lease="b")
    assert await store.save(KEY, b"mine", 60, lease="a")
    assert await store.load(KEY) == [b"mine"]


async def test_parts_appended_to_a_record_load_after_it_until_it_is_saved_again(
    store: SessionStore,
) -> None:
    assert not await store.append(KEY, b"orphan", 60)  # no record to append to
    assert await store.load(KEY) is None
    await store.save(KEY, b"record", 60)
    assert await store.append(KEY, b"one", 60)
    assert await store.append(KEY, b"two", 60)
    assert await store.load(KEY) == [b"record", b"one", b"two"]
    await store.save(KEY, b"whole", 60)  # a new record replaces the parts too
    assert await store.load(KEY) == [b"whole"]
    assert await store.acquire(KEY, "a", 30)
    assert not await store.append(KEY, b"not mine", 60, lease="b")
    assert await store.append(KEY, b"mine", 60, lease="a")
    assert await store.load(KEY) == [b"whole", b"mine"]
    assert not await store.delete(KEY, lease="b")
    assert await store.load(KEY) == [b"whole", b"mine"]
    assert await store.delete(KEY, lease="a")
    assert await store.load(KEY) is None


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan")])
async def test_a_bad_ttl_or_key_is_refused(store: SessionStore, ttl: float) -> None:
    with pytest.raises(ValueError, match="time to live"):
        await store.save(KEY, b"x", ttl)
    with pytest.raises(ValueError, match="time to live"):
        await store.acquire(KEY, "a", ttl)
    with pytest.raises(ValueError, match="session key"):
        await store.load("")
    with pytest.raises(ValueError, match="session key"):
        await store.save("line\nbreak", b"x", 1)


async def test_two_redis_clients_racing_for_one_lease_one_wins(
    redis_under_test: RedisUnderTest,
) -> None:
    clients = [redis_under_test.connect() for _ in range(8)]
    stores = [RedisStore(client=client) for client in clients]
    try:
        won = await asyncio.gather(
            *(s.acquire(KEY, f"owner-{i}", 30) for i, s in enumerate(stores))
        )
        assert sum(won) == 1
        winner = won.index(True)
        assert await stores[(winner + 1) % 8].release(KEY, f"owner-{winner}")  # by token only
        assert await stores[0].acquire(KEY, "late", 30)
    finally:
        for s, client in zip(stores, clients, strict=True):
            await s.close()
            await client.aclose()


async def test_memory_records_and_leases_expire_on_the_injected_clock(clock: Clock) -> None:
    store = MemoryStore(clock)
    await store.save(KEY, b"r", 10)
    assert await store.acquire(KEY, "a", 5)
    clock.now += 4.9
    assert await store.load(KEY) == [b"r"]
    assert not await store.acquire(KEY, "b", 5)
    clock.now += 0.2
    assert await store.acquire(KEY, "b", 5)  # a's lease expired
    assert not await store.renew(KEY, "a", 5)
    clock.now += 5
    assert await store.load(KEY) is None


async def test_an_append_keeps_the_record_for_its_ttl_from_then(clock: Clock) -> None:
    store = MemoryStore(clock)
    await store.save(KEY, b"r", 1)
    clock.now += 0.9
    assert await store.append(KEY, b"p", 1)
    clock.now += 0.9
    assert await store.load(KEY) == [b"r", b"p"]
    clock.now += 0.2
    assert await store.load(KEY) is None


async def test_redis_expires_records_and_leases_by_its_own_clock(
    redis_under_test: RedisUnderTest,
) -> None:
    redis_store = redis_under_test.store
    assert await redis_store.acquire(KEY, "a", 0.05)
    await redis_store.save(KEY, b"r", 0.05)  # after the lease: it expires after it too
    for _ in range(500):  # Redis' own expiry, polled within a bound
        if await redis_store.load(KEY) is None:
            break
        await asyncio.sleep(0.01)
    assert await redis_store.load(KEY) is None
    assert await redis_store.acquire(KEY, "b", 30)


async def test_redis_key_names_hold_the_session_key_and_never_the_record(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    await redis_store.save(KEY, b"secret-handle-bytes", 60)
    await redis_store.acquire(KEY, "owner", 30)
    raw = aioredis.Redis.from_url(redis_server.url)
    try:
        names = sorted(await raw.keys("*"))
    finally:
        await raw.aclose()
    assert names == [
        b"realtime-resumption:{room-42}:lease",
        b"realtime-resumption:{room-42}:record",
    ]


async def test_a_key_of_another_type_is_a_clear_store_error(
    redis_under_test: RedisUnderTest,
) -> None:
    redis_store = redis_under_test.store
    raw = redis_under_test.connect()
    try:
        await raw.hset(redis_store.record_key(KEY), "field", "value")
    finally:
        await raw.aclose()
    with pytest.raises(StoreError, match="holds another type"):
        await redis_store.load(KEY)


async def test_a_stopped_server_is_a_bounded_store_error(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    await redis_store.save(KEY, b"r", 60)
    await redis_server.stop()
    async with asyncio.timeout(5):
        with pytest.raises(StoreError, match="redis load"):
            await redis_store.load(KEY)
        with pytest.raises(StoreError, match="redis save"):
            await redis_store.save(KEY, b"r", 60)
    await redis_server.start()
    assert await redis_store.save(KEY, b"back", 60)  # the client reconnects by itself
    assert await redis_store.load(KEY) == [b"back"]


async def test_redis_commands_asked_at_once_share_a_round_trip_each_with_its_own_reply(
    redis_under_test: RedisUnderTest,
) -> None:
    redis_store = redis_under_test.store
    keys = [f"call-{i}" for i in range(50)]
    raw = redis_under_test.connect()
    try:
        await raw.set(redis_store.record_key("wrong"), b"a string")  # not a list
        if isinstance(raw, aioredis.RedisCluster):  # the sessions are on every node
            nodes = {raw.get_node_from_key(redis_store.record_key(k)).name for k in keys}
            assert len(nodes) == len(raw.get_nodes()) == 3
    finally:
        await raw.aclose()
    assert all(await asyncio.gather(*(redis_store.acquire(k, "me", 30) for k in keys)))
    before = redis_store.batches
    outcomes = await asyncio.gather(
        *(redis_store.save(k, k.encode(), 60, lease="me", lease_ttl=30) for k in keys),
        redis_store.append("wrong", b"part", 60),
        return_exceptions=True,
    )
    assert redis_store.batches - before < len(keys) // 10  # pipelined, not one per save
    assert outcomes[:-1] == [True] * len(keys)
    assert isinstance(outcomes[-1], StoreError) and "another type" in str(outcomes[-1])
    assert [await redis_store.load(k) for k in keys] == [[k.encode()] for k in keys]


async def test_a_fenced_write_with_a_lease_ttl_renews_the_writers_lease(
    store: SessionStore, clock: Clock
) -> None:
    assert await store.acquire(KEY, "me", 1.0)
    assert await store.save(KEY, b"r", 60, lease="me", lease_ttl=30.0)
    clock.now += 2.0
    await asyncio.sleep(1.1 if isinstance(store, RedisStore) else 0)  # Redis' own clock
    assert not await store.acquire(KEY, "other", 30)  # still held: the write renewed it
    assert await store.append(KEY, b"p", 60, lease="me")
