"""The session store's errors reach a real AgentSession as LiveKit reports errors: a call whose
lease another live worker holds is one ``error`` event with ``recoverable=False`` (the
AgentSession closes on it), the session is lost rather than left dialling, and a
``generate_reply`` waiting for the first connection fails with that reason instead of waiting
on; a stored record this version cannot read, or a Redis that does not answer, is a recoverable
``error`` event, and the call goes on (fresh, or unsaved until Redis is back)."""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import Agent, AgentSession, llm
from livekit.agents.voice.events import CloseReason
from livekit.plugins import realtime_resumption as rr

from realtime_resumption import RecordError
from realtime_resumption.gemini import GeminiLiveTransport, StoreOptions
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import LeaseHeldError, MemoryStore, SessionStore, StoreError
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..transport.transport_helpers import MODEL
from .lk_helpers import text_call, until

GENERATE_REPLY_TIMEOUT = 5.0
"""The README's bound on a reply that no generation answers (``generate_reply``)."""

KEY = "call-42"
HELD = StoreOptions(write_interval=0.25, lease_ttl=1.0, lease_wait=1.0)
"""The holder renews its lease every beat; the second worker waits for it, in vain, long
enough for the test to ask for a reply while it waits."""


def _model(emu: Emulator, store: SessionStore) -> rr.RealtimeModel:
    return rr.RealtimeModel(
        api_key="emulator-key",
        http_options=emu.http_options(),
        store=store,
        session_key=KEY,
        store_options=HELD,
    )


async def test_a_call_whose_lease_another_worker_holds_is_one_unrecoverable_error() -> None:
    store = MemoryStore()
    agent = Agent(instructions="Be brief.")
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        holder = GeminiLiveTransport(
            client=emu.client(), model=MODEL, store=store, session_key=KEY, store_options=HELD
        )
        await holder.connect()
        try:
            async with text_call(_model(emu, store), agent) as (_, recorder):
                rt = agent.realtime_llm_session
                reply = rt.generate_reply()
                # Bounded by the reply's own timeout: a reply that waits on for the session
                # fails here, or later than the lease's refusal.
                with pytest.raises(llm.RealtimeError, match="another process drives the call"):
                    await asyncio.wait_for(reply, GENERATE_REPLY_TIMEOUT)
                await until(lambda: bool(recorder.closed))
                # Not left dialling: a later request fails at once too.
                assert rt.generate_reply().done()
        finally:
            await holder.disconnect()

    (error,) = recorder.errors
    assert isinstance(error.error, LeaseHeldError) and not error.recoverable
    assert recorder.closed[0].reason is CloseReason.ERROR
    (session,) = emu.ledger.sessions.values()  # the holder's call, left alone
    assert len(session.connections) == 1


async def _errors_of_a_call(emu: Emulator, store: SessionStore) -> list[llm.RealtimeModelError]:
    """The ``error`` events of a call that answers a question, heard on the AgentSession from
    before its first connection."""
    errors: list[llm.RealtimeModelError] = []
    session = AgentSession(llm=_model(emu, store), aec_warmup_duration=None)
    session.on("error", lambda event: errors.append(event.error))
    try:
        await session.start(Agent(instructions="Be brief."))
        result = await session.run(user_input="hello")
        result.expect.next_event().is_message(role="assistant")
    finally:
        await session.aclose()
    return errors


async def test_a_stored_record_that_cannot_be_read_is_a_recoverable_error_and_starts_fresh() -> (
    None
):
    store = MemoryStore()
    await store.save(KEY, b"\x00 not a record", ttl=60.0)
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        errors = await _errors_of_a_call(emu, store)

    (error,) = errors
    assert isinstance(error.error, RecordError) and error.recoverable


async def test_a_redis_down_at_connect_is_a_recoverable_error_and_the_call_goes_on(
    redis_gone_store: RedisStore,
) -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        errors = await _errors_of_a_call(emu, redis_gone_store)

    (error,) = errors  # once per outage, not once per beat
    assert isinstance(error.error, StoreError) and error.recoverable
