"""Parity with the stock Google RealtimeModel: the same AgentSession script, on the same
emulator, with no rotation, gives the same RunResult for both models, and the agent stops
speaking as soon after its answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from livekit.agents import Agent, AgentSession, AgentStateChangedEvent, function_tool

from realtime_resumption.generation import TOOL_CALL_GRACE
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig, answer_text_ids

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


class _Timed(list[tuple[int, int]]):
    """The speaker's ``heard`` list, noting when each frame finished playing."""

    def __init__(self, times: list[float], clock: Callable[[], float]) -> None:
        super().__init__()
        self._times = times
        self._clock = clock

    def append(self, item: tuple[int, int]) -> None:
        self._times.append(self._clock())
        super().append(item)


async def _speaking_after_playout(kind: ModelKind) -> float:
    """Seconds the agent stays "speaking" after the answer's audio finished playing, on a
    real-time emulator (the answer is paced as it plays)."""
    async with Emulator(EmulatorConfig(answer_chunks=5)) as emu:
        speaker = Speaker()
        session = AgentSession(llm=make_model(kind, emu), aec_warmup_duration=None)
        session.output.audio = speaker
        clock = asyncio.get_running_loop().time
        played: list[float] = []
        listening: list[float] = []
        speaker.heard = _Timed(played, clock)

        def state_changed(ev: AgentStateChangedEvent) -> None:
            if ev.old_state == "speaking" and ev.new_state == "listening":
                listening.append(clock())

        session.on("agent_state_changed", state_changed)
        # A function declared: the transport's answer stays open for a tool call that may
        # still finish it, which must not keep the agent speaking.
        await session.start(Agent(instructions="You are helpful.", tools=[lookup]))
        try:
            await session.run(user_input="hello")
            await until(lambda: bool(listening))
        finally:
            await session.aclose()
            await speaker.aclose()
    return listening[0] - played[-1]


@pytest.mark.filterwarnings(
    "ignore:Setting `LiveConnectConfig.generation_config`:DeprecationWarning"
)
async def test_the_agent_stops_speaking_when_its_answer_does_as_with_the_stock_model() -> None:
    stock = await _speaking_after_playout("stock")
    ours = await _speaking_after_playout("ours")
    assert ours < stock + TOOL_CALL_GRACE / 3, (ours, stock)
