"""Parity with the stock Google RealtimeModel: the same AgentSession script, on the same
emulator, with no rotation, gives the same RunResult for both models."""

from __future__ import annotations

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from realtime_resumption.emulator import Emulator, EmulatorConfig, answer_text_ids

from .lk_helpers import ModelKind, Speaker, make_model, until

CHUNKS = 25


@function_tool
async def lookup(city: str = "") -> str:
    """Look up the weather in a city."""
    return "sunny"


# The stock plugin still sets LiveConnectConfig.generation_config, which google-genai deprecates.
@pytest.mark.filterwarnings(
    "ignore:Setting `LiveConnectConfig.generation_config`:DeprecationWarning"
)
@pytest.mark.parametrize("kind", ["stock", "ours"])
async def test_answers_a_tool_call_and_an_interruption_as_the_stock_model_does(
    kind: ModelKind,
) -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1, answer_chunks=CHUNKS)) as emu:
        speaker = Speaker()
        session = AgentSession(llm=make_model(kind, emu), aec_warmup_duration=None)
        session.output.audio = speaker
        await session.start(Agent(instructions="You are helpful.", tools=[lookup]))
        try:
            result = await session.run(user_input="hello")
            message = result.expect.next_event().is_message(role="assistant").event().item
            result.expect.no_more_events()
            assert answer_text_ids(message.text_content or "") == [(0, k) for k in range(CHUNKS)]
            assert not message.interrupted

            result = await session.run(user_input="please lookup the weather in Paris")
            result.expect.next_event().is_function_call(name="lookup")
            result.expect.next_event().is_function_call_output(output="sunny")
            result.expect.next_event().is_message(role="assistant")
            result.expect.no_more_events()

            run = session.run(user_input="tell me a long story")
            await until(lambda: sum(1 for t, _ in speaker.heard if t == 2) >= 3)
            await session.interrupt()
            result = await run
            message = result.expect.next_event().is_message(role="assistant").event().item
            result.expect.no_more_events()
            assert message.interrupted
            heard = [k for t, k in speaker.heard if t == 2]
            assert 3 <= len(heard) < CHUNKS

            result = await session.run(user_input="hello again")
            message = result.expect.next_event().is_message(role="assistant").event().item
            result.expect.no_more_events()
            assert not message.interrupted
        finally:
            await session.aclose()
            await speaker.aclose()
