"""New instructions and tools mid-call: the live connection cannot take them, so the session
moves to a connection set up with them (the emulator's ledger records each setup)."""

from __future__ import annotations

import asyncio

from google.genai import types
from livekit.agents import Agent, AgentSession, function_tool
from livekit.plugins import realtime_resumption as rr
from livekit.plugins.realtime_resumption.session_updates import merged

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import GenerationSettings, SessionUpdate, SetupRefusedError

from .lk_helpers import WAIT, text_call, until


@function_tool
async def lookup(what: str = "") -> str:
    """Look something up."""
    return "found"


@function_tool
async def book(what: str = "") -> str:
    """Book something."""
    return "booked"


async def test_new_instructions_and_tools_move_the_session_to_a_new_setup() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(api_key="test-key", http_options=emu.http_options())
        agent = Agent(instructions="First instructions.", tools=[lookup])
        async with text_call(model, agent) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")

            await agent.update_instructions("Second instructions.")
            await until(lambda: len(recorder.moves) == 1)
            # A resumed connection says nothing until there is something to say: the next
            # move waits for the handle after this turn.
            result = await session.run(user_input="hello again")
            result.expect.next_event().is_message(role="assistant")
            await agent.update_tools([lookup, book])
            await until(lambda: len(recorder.moves) == 2)

            # The new tool works on the connection that declared it.
            result = await session.run(user_input="please book a table")
            result.expect.next_event().is_function_call(name="book")
            result.expect.next_event().is_function_call_output(output="booked")
            result.expect.next_event().is_message(role="assistant")
            result.expect.no_more_events()
            # The conversation was kept: the chat context holds no item twice.
            ids = [item.id for item in agent.realtime_llm_session.chat_ctx.items]
            assert len(ids) == len(set(ids))

    (record,) = emu.ledger.sessions.values()
    setups = [c.setup for c in record.connections if c.established]
    assert [(s.system_instruction, s.tools) for s in setups if s is not None] == [
        ("First instructions.", ("lookup",)),
        ("Second instructions.", ("lookup",)),
        ("Second instructions.", ("lookup", "book")),
    ]
    assert [m.report.reason for m in recorder.moves] == [MoveReason.CONFIG, MoveReason.CONFIG]
    assert all(m.report.outcome is MoveOutcome.RESUMED for m in recorder.moves)
    assert recorder.reconnected == 2
    assert recorder.fatal_errors == []
    (summary,) = emu.ledger.summary().sessions.values()
    assert summary.answers_cut == ()
    assert summary.stranded_tool_responses == ()


def test_updates_held_for_the_first_connection_merge_setting_by_setting() -> None:
    """What a session keeps for its first connection while it dials: a later update keeps
    each setting an earlier one gave and it does not (a temperature given before new
    instructions, one generation setting before another)."""
    first = SessionUpdate(
        voice="Puck", response_modality="text", generation=GenerationSettings(temperature=0.9)
    )
    second = SessionUpdate(instructions="Be brief.", generation=GenerationSettings(top_p=0.8))
    assert merged(first, second) == SessionUpdate(
        instructions="Be brief.",
        voice="Puck",
        response_modality="text",
        generation=GenerationSettings(temperature=0.9, top_p=0.8),
    )
    assert merged(None, second) is second


async def test_generation_settings_reach_the_setup_and_a_new_temperature_moves_the_session() -> (
    None
):
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(
            api_key="test-key",
            http_options=emu.http_options(),
            temperature=0.4,
            max_output_tokens=300,
            top_p=0.8,
            presence_penalty=0.1,
            thinking_config=types.ThinkingConfig(thinking_budget=0),
            proactivity=True,
        )
        agent = Agent(instructions="Be helpful.")
        async with text_call(model, agent) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            model.update_options(temperature=0.9)
            await until(lambda: len(recorder.moves) == 1)

    (record,) = emu.ledger.sessions.values()
    first, second = (c.setup for c in record.connections if c.established)
    assert first is not None and second is not None
    assert first.generation == {
        "temperature": 0.4,
        "max_output_tokens": 300,
        "top_p": 0.8,
        "presence_penalty": 0.1,
        "thinking_config": {"thinking_budget": 0},
        "proactivity": {"proactive_audio": True},
    }
    assert second.generation == {**first.generation, "temperature": 0.9}
    assert [m.report.reason for m in recorder.moves] == [MoveReason.CONFIG]


async def test_an_update_is_live_when_awaited_so_the_next_question_sees_it() -> None:
    """``update_tools`` and ``update_instructions`` return once the session runs on a
    connection set up with them: the very next question is answered there."""
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(api_key="test-key", http_options=emu.http_options())
        session = AgentSession(llm=model, aec_warmup_duration=None)
        agent = Agent(instructions="First instructions.", tools=[lookup])
        await session.start(agent)
        try:
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            await agent.update_tools([lookup, book])
            result = await session.run(user_input="please book a table")
            result.expect.next_event().is_function_call(name="book")
            result.expect.next_event().is_function_call_output(output="booked")
            result.expect.next_event().is_message(role="assistant")
            # Right after a move too (the new connection has issued no handle yet).
            await agent.update_instructions("Second instructions.")
            result = await session.run(user_input="hello again")
            result.expect.next_event().is_message(role="assistant")
        finally:
            await session.aclose()
    (record,) = emu.ledger.sessions.values()
    answered_on = [record.connections[turn.connection].setup for turn in record.turns.values()]
    setups = [(s.system_instruction, s.tools) for s in answered_on if s is not None]
    # Each question is answered on the setup awaited before it. (At this time scale an answer
    # comes within the replay's margin of its question, which a move may then replay: a
    # repeat answer on the same setup is the README's known limit, not this test's concern.)
    assert [x for i, x in enumerate(setups) if i == 0 or setups[i - 1] != x] == [
        ("First instructions.", ("lookup",)),
        ("First instructions.", ("lookup", "book")),
        ("Second instructions.", ("lookup", "book")),
    ]


async def test_the_last_of_rapid_instruction_updates_wins_promptly() -> None:
    """Ten updates in one second, at the service's pace (0.3 s setups), each made while the
    moves of the earlier ones run: every one returns, and the session ends on the last."""
    async with Emulator(EmulatorConfig(time_scale=1.0, answer_chunks=3)) as emu:
        model = rr.RealtimeModel(api_key="test-key", http_options=emu.http_options())
        session = AgentSession(llm=model, aec_warmup_duration=None)
        agent = Agent(instructions="v0")
        await session.start(agent)
        try:
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            loop = asyncio.get_running_loop()
            began = loop.time()
            updates = []
            for n in range(1, 11):
                updates.append(asyncio.create_task(agent.update_instructions(f"v{n}")))
                await asyncio.sleep(0.1)
            async with asyncio.timeout(WAIT):
                await asyncio.gather(*updates)
            # Promptly: within a few moves (0.85 s each here) of the last update, not at a
            # later turn.
            assert loop.time() - began < 1.0 + 3 * 1.0
            result = await session.run(user_input="hello again")
            result.expect.next_event().is_message(role="assistant")
        finally:
            await session.aclose()
    (record,) = emu.ledger.sessions.values()
    last_turn = record.turns[max(record.turns)]
    setup = record.connections[last_turn.connection].setup
    assert setup is not None and setup.system_instruction == "v10"


async def test_a_voice_the_service_refuses_is_rolled_back_and_the_call_goes_on() -> None:
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        model = rr.RealtimeModel(api_key="test-key", http_options=emu.http_options())
        agent = Agent(instructions="Be helpful.")
        async with text_call(model, agent) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            model.update_options(voice="Klingon")
            await until(lambda: len(recorder.moves) == 1)
            result = await session.run(user_input="hello again")
            result.expect.next_event().is_message(role="assistant")

    (report,) = [m.report for m in recorder.moves]
    assert (report.reason, report.outcome) == (MoveReason.CONFIG, MoveOutcome.RESUMED)
    (error,) = recorder.errors
    assert error.recoverable and isinstance(error.error, SetupRefusedError)
    assert recorder.fatal_errors == []
    session_record = next(iter(emu.ledger.sessions.values()))
    served = [c.setup for c in session_record.connections if c.established]
    assert [s.voice for s in served if s is not None] == ["Puck", "Puck"]
    refused = [c.refused for r in emu.ledger.sessions.values() for c in r.connections]
    # (the service refused the first resume while the old connection was open, as measured)
    assert [why for why in refused if why not in (None, "open-session")] == ["voice", "voice"]
