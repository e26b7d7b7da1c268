"""The session store's errors reach a real pipeline as Pipecat reports errors: a call whose
lease another live worker holds ends with one permanent ``ErrorFrame`` saying so (the service
marked unusable), never an exception in the connect task that only the task manager logs; a
stored record this version cannot read, or a Redis that does not answer, is a non-permanent
``ErrorFrame``, and the call goes on (fresh, or unsaved until Redis is back)."""

from __future__ import annotations

from pipecat.frames.frames import ErrorFrame, InputTextRawFrame, LLMFullResponseEndFrame

from realtime_resumption import RecordError
from realtime_resumption.gemini import GeminiLiveTransport, StoreOptions
from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import LeaseHeldError, MemoryStore, SessionStore, StoreError
from realtime_resumption.testing.emulator import Emulator

from ..transport.transport_helpers import MODEL
from . import services
from .rig import Rig, emulator_config

KEY = "call-42"
HELD = StoreOptions(write_interval=0.25, lease_ttl=1.0, lease_wait=0.3)
"""The holder renews its lease every beat; the second worker waits a little for it, in vain."""


async def _an_error_then_an_answer(
    emu: Emulator, store: SessionStore
) -> tuple[GeminiLiveLLMService, Rig]:
    """Our service on ``store`` in a pipeline: an ``ErrorFrame`` first, then a question it
    answers. Returns the service and the (ended) rig."""
    service = services.ours(emu, store=store, session_key=KEY, store_options=HELD)
    async with Rig([service]) as rig:
        await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
        await rig.queue(InputTextRawFrame("hello there"))
        await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
    return service, rig


async def test_a_call_whose_lease_another_worker_holds_is_one_permanent_error_frame() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config()) as emu:
        holder = GeminiLiveTransport(
            client=emu.client(), model=MODEL, store=store, session_key=KEY, store_options=HELD
        )
        await holder.connect()
        try:
            service = services.ours(emu, store=store, session_key=KEY, store_options=HELD)
            async with Rig([service]) as rig:
                await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
        finally:
            await holder.disconnect()

    (error,) = rig.of(ErrorFrame, up=True)
    assert isinstance(error.exception, LeaseHeldError)
    assert "another process drives the call" in error.error
    # Permanent in Pipecat 1.14's terms: this service cannot serve the call.
    assert error.processor is service and not service.is_usable
    # The holder's call was left alone: one connection, the holder's.
    (session,) = emu.ledger.sessions.values()
    assert len(session.connections) == 1


async def test_a_stored_record_that_cannot_be_read_is_an_error_frame_and_the_call_starts_fresh() -> (
    None
):
    store = MemoryStore()
    await store.save(KEY, b"\x00 not a record", ttl=60.0)
    async with Emulator(emulator_config()) as emu:
        service, rig = await _an_error_then_an_answer(emu, store)

    (error,) = rig.of(ErrorFrame, up=True)
    assert isinstance(error.exception, RecordError)
    assert service.is_usable


async def test_a_redis_down_at_connect_is_an_error_frame_and_the_call_goes_on(
    redis_gone_store: RedisStore,
) -> None:
    async with Emulator(emulator_config()) as emu:
        service, rig = await _an_error_then_an_answer(emu, redis_gone_store)

    (error,) = rig.of(ErrorFrame, up=True)  # once per outage, not once per beat
    assert isinstance(error.exception, StoreError)
    assert service.is_usable
