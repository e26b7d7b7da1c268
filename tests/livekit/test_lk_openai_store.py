"""The plugin's OpenAI ``RealtimeModel`` keeps its sessions' calls in a store: under
``session_key``, by default the LiveKit job's room name, as the Gemini model does. A real
``AgentSession`` in a fake job (LiveKit's own ``JobContext``) against the OpenAI Realtime
emulator."""

from __future__ import annotations

import pytest
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.store import MemoryStore
from realtime_resumption.testing.openai_emulator import OpenAIEmulator

from ..store.test_drain_livekit import ROOM, in_job
from .test_lk_openai_model import livekit_call


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_session_in_a_job_keeps_its_call_under_the_rooms_name(
    openai_emulator: OpenAIEmulator,
) -> None:
    store = MemoryStore()
    with in_job():
        async with livekit_call(openai_emulator, store=store) as (session, _, _, _):
            await session.generate_reply(instructions="Greet the caller.")
            # The session drives the call: another process asking for the room is refused.
            assert not await store.acquire(ROOM, "another-process", 1.0)
    # The call ended with the session: its lease is free and its record gone.
    assert await store.acquire(ROOM, "another-process", 1.0)
    assert await store.load(ROOM) is None


def test_the_store_key_is_the_session_key_given_else_the_rooms_name() -> None:
    store = MemoryStore()
    plain = rr.openai.RealtimeModel(api_key="sk-test")
    assert plain.store_keywords() == {}
    named = rr.openai.RealtimeModel(api_key="sk-test", store=store, session_key="call-9")
    assert named.store_keywords()["session_key"] == "call-9"
    model = rr.openai.RealtimeModel(api_key="sk-test", store=store)
    with pytest.raises(ValueError, match="needs a session_key outside a LiveKit job"):
        model.store_keywords()
    with in_job():
        assert model.store_keywords() == {
            "store": store,
            "session_key": ROOM,
            "store_options": None,
        }
