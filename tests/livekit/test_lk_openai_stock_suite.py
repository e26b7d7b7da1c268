"""What LiveKit's OpenAI realtime examples rely on, run on the stock model and on ours side by
side against the OpenAI Realtime emulator, with the same results.

livekit/agents ships no test module for its OpenAI realtime model (its realtime tests run a
fake model); its examples (``examples/voice_agents``) do what is told here through public API:
a spoken turn, a greeting asked for with ``generate_reply(instructions=...)``, a typed turn
(``generate_reply(user_input=...)``), a function tool the model calls and whose result it
speaks, and the agent's answer cut when the user talks over it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Literal

import aiohttp
import pytest
from livekit.agents import Agent, function_tool, llm
from livekit.agents.metrics import RealtimeModelMetrics
from livekit.plugins import openai as lk_openai
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.openai import OpenAIRealtimeOptions
from realtime_resumption.testing.openai_emulator import OpenAIEmulator

from ..openai_emulator.oai_helpers import RATE, config
from .lk_helpers import CallParts, said, started_voice_call, until

PACE = 0.05
Kind = Literal["stock", "ours"]
both = pytest.mark.parametrize("kind", ["stock", "ours"])


@contextlib.asynccontextmanager
async def call(emu: OpenAIEmulator, kind: Kind, agent: Agent) -> AsyncIterator[CallParts]:
    """A started AgentSession on ``kind``'s model pointed at ``emu``."""
    connector = aiohttp.TCPConnector(ssl=emu.client_ssl_context())
    async with aiohttp.ClientSession(connector=connector) as http:
        model: llm.RealtimeModel
        if kind == "stock":
            model = lk_openai.realtime.RealtimeModel(
                api_key="sk-test", base_url=emu.base_url, http_session=http
            )
        else:
            model = rr.openai.RealtimeModel(
                api_key="sk-test",
                base_url=emu.base_url,
                realtime_options=OpenAIRealtimeOptions(websocket_options=emu.websocket_options()),
            )
        async with started_voice_call(model, agent, pace=PACE, rate=RATE) as c:
            yield c.parts


@both
async def test_a_greeting_asked_for_with_instructions(kind: Kind) -> None:
    """``generate_reply(instructions=...)`` at the start: one answer, spoken, in history,
    the connection's acquire time and the answer's usage in ``metrics_collected``."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=3)) as emu:
        async with call(emu, kind, Agent(instructions="Be brief.")) as (session, _, speaker, rec):
            handle = session.generate_reply(instructions="greet the user")
            async with asyncio.timeout(10):
                await handle
            await until(lambda: len(speaker.heard) >= 3 and not speaker.playing)
            assert len(said(session, "assistant")) == 1

            def realtime() -> list[RealtimeModelMetrics]:
                return [m for m in rec.metrics if isinstance(m, RealtimeModelMetrics)]

            await until(lambda: any(m.request_id for m in realtime()))
            assert any(m.acquire_time and m.acquire_time > 0 for m in realtime())
            usage = next(m for m in realtime() if m.request_id)
            assert usage.output_tokens > 0 and usage.ttft >= 0
            assert not rec.errors
    (answer,) = emu.ledger.sessions[0].answers
    assert answer.outcome == "complete"


@both
async def test_a_typed_turn_is_answered(kind: Kind) -> None:
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        async with call(emu, kind, Agent(instructions="Be brief.")) as (session, _, _, rec):
            handle = session.generate_reply(user_input="typed words")
            async with asyncio.timeout(10):
                await handle
            await until(lambda: len(said(session, "assistant")) >= 1)
            assert "heard typed words" in said(session, "assistant")[-1]
            assert said(session, "user") == ["typed words"]
            assert not rec.errors


class WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Use the tools.")
        self.asked: list[str] = []

    @function_tool
    async def weather(self, location: str = "here") -> str:
        """The weather somewhere."""
        self.asked.append(location)
        return "sunny"


@both
async def test_a_function_tool_is_called_and_its_result_spoken(kind: Kind) -> None:
    """The user says the tool's name: the model calls it, the agent runs it, and the answer
    that follows uses its output."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        agent = WeatherAgent()
        async with call(emu, kind, agent) as (session, mic, _, rec):
            mic.say(["weather"])
            await until(lambda: bool(agent.asked), timeout=10)
            await until(lambda: any("result" in t for t in said(session, "assistant")), timeout=10)
            assert len(agent.asked) == 1
            assert "sunny" in next(t for t in said(session, "assistant") if "result" in t)
            assert not rec.errors
    record = emu.ledger.sessions[0]
    assert len(record.answers[0].calls) == 1


@both
async def test_the_user_talking_over_the_answer_cuts_it(kind: Kind) -> None:
    """A long answer, the user speaks over it: the answer stops (the speaker is cleared),
    its stored audio is cut where playback stopped, the next turn is answered."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=40)) as emu:
        async with call(emu, kind, Agent(instructions="Be brief.")) as (session, mic, spk, rec):
            mic.say(["long", "story"])
            await until(lambda: len(spk.heard) >= 2, timeout=10)
            mic.say(["stop"])
            await until(lambda: any("heard stop" in t for t in said(session, "assistant")), 15)
            assert not rec.fatal_errors
    first = emu.ledger.sessions[0].answers[0]
    assert first.outcome != "complete"
    # What was played stays in the conversation, the rest is cut (``truncate``).
    assert first.heard_ms is not None and first.heard_ms < 40 * first.chunk_ms


@both
async def test_new_instructions_reach_the_live_session(kind: Kind) -> None:
    """``Agent.update_instructions`` mid-call: one more ``session.update`` on the same
    session, and the next turn is answered there."""
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        agent = Agent(instructions="Be brief.")
        async with call(emu, kind, agent) as (session, mic, _, rec):
            mic.say(["hello"])
            await until(lambda: len(said(session, "assistant")) >= 1)
            before = emu.ledger.sessions[0].client_events["session.update"]
            async with asyncio.timeout(10):
                await agent.update_instructions("Be very brief.")
            await until(lambda: emu.ledger.sessions[0].client_events["session.update"] > before)
            mic.say(["again"])
            await until(lambda: len(said(session, "assistant")) >= 2, timeout=10)
            assert "heard again" in said(session, "assistant")[-1]
            assert not rec.errors
    assert len(emu.ledger.sessions) == 1


@both
async def test_an_agents_history_reaches_the_new_session(kind: Kind) -> None:
    """An ``Agent`` made with a chat context (a handoff's history): the session is given it
    without answering it, and a later turn can recall it."""
    history = llm.ChatContext.empty()
    history.add_message(role="user", content="pineapple")
    history.add_message(role="assistant", content="noted")
    async with OpenAIEmulator(config(time_scale=PACE, answer_chunks=2)) as emu:
        agent = Agent(instructions="Be brief.", chat_ctx=history)
        async with call(emu, kind, agent) as (session, mic, _, rec):
            mic.say(["recall"])
            await until(lambda: len(said(session, "assistant")) >= 1, timeout=10)
            assert "recall pineapple" in said(session, "assistant")[-1]
            assert not rec.errors
    (record,) = emu.ledger.sessions
    assert len(record.answers) == 1
