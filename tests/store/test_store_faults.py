"""The store under faults and attack: a crash taken over with the default options, a record
copied under another call's key or nested past reason. A real Redis server and the strict
emulator over real TLS."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from cryptography.fernet import Fernet

from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.gemini.stored_session import RECORD_VERSION, RecordError
from realtime_resumption.moves import MoveOutcome, MoveReason
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import LeaseHeldError, MemoryStore
from realtime_resumption.testing.emulator import Emulator

from ..livekit.lk_helpers import until
from ..transport.transport_helpers import Recorder, answered_with_handle, emulator_config
from .takeover_helpers import (
    KEY,
    crash,
    current,
    make_transport,
    stream_speech,
)


async def test_a_crash_is_taken_over_with_the_default_store_options(
    redis_store: RedisStore,
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, redis_store, StoreOptions())
        rec_a = Recorder(a)
        await a.connect()
        await answered_with_handle(a, rec_a)
        await stream_speech(a, 1, 20)
        await crash(a)  # its lease lives on for its time to live
        b = make_transport(emu, redis_store, StoreOptions())  # a re-dispatch, as the README has it
        rec_b = Recorder(b)
        await b.connect()
        await stream_speech(b, 1000, 10)
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    assert set(range(1000, 1010)) <= set(
        emu.ledger.summary().sessions[session.session_id].audio_consumed
    )


async def test_a_second_live_driver_is_refused_with_the_default_wait(
    redis_store: RedisStore,
) -> None:
    options = StoreOptions(lease_ttl=1.0)  # the default wait, on a short lease: a short test
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, redis_store, options)
        await a.connect()
        b = make_transport(emu, redis_store, options)
        dialled = len(emu.ledger.attempts)
        with pytest.raises(LeaseHeldError, match="lease was renewed") as refused:
            await b.connect()
        assert len(emu.ledger.attempts) == dialled  # B never dialled
        assert not b.is_connected and a.is_connected
        await a.disconnect()
    assert KEY in str(refused.value)


def test_the_default_wait_for_a_held_lease_outlasts_the_lease_and_a_bad_one_is_refused() -> None:
    assert StoreOptions().wait_for_lease == 5.0 + 0.1
    assert StoreOptions(lease_ttl=1.0).wait_for_lease == 1.0 + 0.1
    assert StoreOptions(lease_wait=0.0).wait_for_lease == 0.0
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="lease_wait"):
            StoreOptions(lease_wait=bad)


async def test_a_record_copied_under_another_calls_key_is_refused_and_that_call_starts_fresh() -> (
    None
):
    store = MemoryStore()
    options = StoreOptions(encryption_key=Fernet.generate_key())  # one key for the deployment
    async with Emulator(emulator_config("gemini")) as emu:
        first = make_transport(
            emu, store, options, system_instruction="The caller's account is 4111-0042."
        )
        rec_first = Recorder(first)
        await first.connect()
        await answered_with_handle(first, rec_first, "my account number is 4111-0042")
        await until(lambda: first.store_stats is not None and first.store_stats.writes > 0)
        await crash(first)
        copied = await store.load(KEY)
        assert copied is not None
        await store.save("call-8", copied[0], 60)
        for part in copied[1:]:
            assert await store.append("call-8", part, 60)

        second = make_transport(emu, store, options, key="call-8")
        rec_second = Recorder(second)
        await second.connect()
        await answered_with_handle(second, rec_second)
        await second.disconnect()

    assert rec_second.moves == []  # not a takeover of the first caller's call
    ((event,),) = rec_second.of("on_error")
    assert isinstance(event.error, RecordError) and event.recoverable
    assert "another session key" in str(event.error)
    assert "4111" not in str(event.error)
    sessions = list(emu.ledger.sessions.values())
    assert len(sessions) == 2  # a server session of its own
    (connection,) = sessions[1].connections
    assert connection.setup is not None and "4111" not in connection.setup.system_instruction
    assert all("4111" not in text for c in connection.client_messages for _, text in c.turns)


async def test_a_record_nested_past_reason_is_reported_and_the_call_starts_fresh() -> None:
    store = MemoryStore()
    depth = 200_000
    body = b"[" * depth + b"]" * depth
    await store.save(
        KEY, b"RRS" + bytes((RECORD_VERSION, 0)) + len(body).to_bytes(4, "big") + body, 60
    )
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        rec = Recorder(a)
        await a.connect()
        ((event,),) = rec.of("on_error")
        assert isinstance(event.error, RecordError) and event.recoverable
        assert rec.moves == []
        await answered_with_handle(a, rec)
        for _ in range(100):  # the next beat writes the call's own record: bounded poll
            with contextlib.suppress(RecordError):  # the bad one, until then
                if await current(store, a.resumption_handle):
                    break
            await asyncio.sleep(0.02)
        assert await current(store, a.resumption_handle)  # the bad record is gone
        await a.disconnect()
