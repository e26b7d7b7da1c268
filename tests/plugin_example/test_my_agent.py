"""What a user's own agent tests look like with the ``realtime_resumption`` pytest plugin.

The fixtures come from the plugin's entry point: no conftest, no import of the emulator.
"""

from __future__ import annotations

import asyncio

import pytest
from google import genai
from google.genai import types

from realtime_resumption import Emulator, GeminiLiveTransport, MoveOutcome, MoveReport
from realtime_resumption.transport import ContentTurn

MODEL = "gemini-live-2.5-flash-preview"
CONFIG = types.LiveConnectConfig(
    response_modalities=[types.Modality.AUDIO],
    session_resumption=types.SessionResumptionConfig(),
)


async def answer(session: genai.live.AsyncSession, question: str) -> list[types.LiveServerMessage]:
    """The user's agent: ask, and collect the answer."""
    await session.send_realtime_input(text=question)
    return [message async for message in session.receive()]


@pytest.mark.gemini_emulator(time_scale=0.05)
async def test_my_agent_answers(gemini_client: genai.Client) -> None:
    async with gemini_client.aio.live.connect(model=MODEL, config=CONFIG) as session:
        messages = await answer(session, "hello")
    assert any(m.server_content and m.server_content.model_turn for m in messages)
    assert messages[-1].server_content and messages[-1].server_content.turn_complete


@pytest.mark.gemini_emulator(time_scale=0.05)
async def test_my_agent_is_told_to_go_away(
    gemini_emulator: Emulator, gemini_client: genai.Client
) -> None:
    async with gemini_client.aio.live.connect(model=MODEL, config=CONFIG) as session:
        await gemini_emulator.faults.go_away(10.0)  # the two lines that script a rotation
        message = await anext(aiter(session.receive()))
    assert message.go_away is not None and message.go_away.time_left == "0.500s"


@pytest.mark.parametrize("gemini_emulator", ["gemini", "vertex"], indirect=True)
@pytest.mark.gemini_emulator(time_scale=0.05)
async def test_the_transport_survives_a_drop_on_both_profiles(
    gemini_emulator: Emulator, gemini_client: genai.Client
) -> None:
    transport = GeminiLiveTransport(client=gemini_client, model=MODEL)
    answered, handle, moved = asyncio.Event(), asyncio.Event(), asyncio.Event()
    moves: list[MoveReport] = []
    transport.on_generation_end = lambda gid, reason: answered.set()
    transport.on_resumption_update = lambda handle_, resumable, index: handle.set()
    transport.on_move = lambda report: (moves.append(report), moved.set())
    await transport.connect()
    try:
        transport.send_live_text([ContentTurn("user", "hello")])
        async with asyncio.timeout(10):
            await answered.wait()
            await handle.wait()
        assert gemini_emulator.faults.drop() == 1  # the connection vanishes
        async with asyncio.timeout(10):
            await moved.wait()
    finally:
        await transport.disconnect()
    assert [m.outcome for m in moves] == [MoveOutcome.RESUMED]
    assert gemini_emulator.ledger.summary().audio_lost_count == 0
