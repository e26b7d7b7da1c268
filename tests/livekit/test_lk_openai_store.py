"""The plugin's OpenAI ``RealtimeModel`` keeps its sessions' calls in a store: under
``session_key``, by default the LiveKit job's room name, as the Gemini model does. A real
``AgentSession`` in a fake job (LiveKit's own ``JobContext``) against the OpenAI Realtime
emulator."""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import Agent, APIConnectOptions, llm
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.openai import OpenAIRealtimeOptions, OpenAIRealtimeTransport, SessionConfig
from realtime_resumption.store import LeaseHeldError, MemoryStore, StoreOptions
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.transport import ContentTurn

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


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_second_session_for_a_driven_room_reports_the_held_lease_as_an_error(
    openai_emulator: OpenAIEmulator,
) -> None:
    store = MemoryStore()
    options = OpenAIRealtimeOptions(websocket_options=openai_emulator.websocket_options())
    model = {"api_key": "sk-test", "base_url": openai_emulator.base_url, "store": store}
    with in_job():
        async with livekit_call(openai_emulator, store=store) as (session, _, _, _):
            await session.generate_reply(instructions="Greet the caller.")
            second = rr.openai.RealtimeModel(
                **model,
                realtime_options=options,
                store_options=StoreOptions(lease_wait=0),
                conn_options=APIConnectOptions(max_retry=0, timeout=5.0),
            ).session()
            errors: list[llm.RealtimeModelError] = []
            failed = asyncio.Event()
            second.on("error", lambda e: (errors.append(e), failed.set()))
            async with asyncio.timeout(10):
                await failed.wait()
            await second.aclose()
    (error,) = errors
    assert isinstance(error.error, LeaseHeldError) and not error.recoverable
    assert len(openai_emulator.ledger.sessions) == 1  # the second never dialled


@pytest.mark.openai_emulator(time_scale=0.05, answer_chunks=3)
async def test_a_call_taken_over_is_not_given_the_new_agents_start_again(
    openai_emulator: OpenAIEmulator,
) -> None:
    """A call another process left in the store goes on from its stored conversation and
    setup, as on Gemini: the chat context and instructions the new AgentSession's agent
    starts with are not given to the taken-over session (the stored conversation would be
    told a second story); what the app asks for once the call is up still goes."""
    emu, store = openai_emulator, MemoryStore()
    first = OpenAIRealtimeTransport(
        emu.client(),
        SessionConfig(instructions="Be brief."),
        OpenAIRealtimeOptions(websocket_options=emu.websocket_options()),
        store=store,
        session_key="call-1",
    )
    await first.connect()
    first.send_content([ContentTurn("user", "my name is Ada")], turn_complete=False)
    await first.hand_over()

    start = llm.ChatContext.empty()
    start.add_message(role="user", content="my name is Bob")
    agent = Agent(instructions="Be verbose.", chat_ctx=start)
    async with livekit_call(emu, agent=agent, store=store, session_key="call-1") as (
        session,
        _,
        _,
        recorder,
    ):
        await session.generate_reply(instructions="Greet the caller.")
        rt = agent.realtime_llm_session
        assert rt._transport.taken_over
        instructions = rt._transport.config.instructions
        errors = list(recorder.errors)

    taker = emu.ledger.sessions[-1]
    assert [i.text for i in taker.seeded] == ["my name is Ada"]
    assert "Bob" not in taker.conversation_text
    assert instructions == "Be brief."
    assert [a.outcome for a in taker.answers] == ["complete"]  # the greeting asked for
    assert errors == []
