"""Our LiveKit plugin on gemini-3.8-live: instructions the model takes in the session (no
move), history with roles mid-session, a non-blocking tool across a move."""

from __future__ import annotations

import asyncio

from google.genai import types
from google.oauth2.credentials import Credentials
from livekit.agents import Agent, function_tool
from livekit.plugins import realtime_resumption as rr

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator

from ..transport.transport_helpers import (
    MODEL_38,
    live38_config,
    only_session,
    sends_context_updates,
)
from .lk_helpers import text_call, until, voice_call


@sends_context_updates
async def test_new_instructions_on_3_8_through_vertex_open_no_connection() -> None:
    async with Emulator(live38_config("vertex", time_scale=0.1, answer_chunks=4)) as emu:
        model = rr.RealtimeModel(
            model=MODEL_38,
            vertexai=True,
            project="emulator-project",
            location="us-central1",
            credentials=Credentials(token="emulator-token"),  # type: ignore[no-untyped-call]
            http_options=emu.http_options(),
        )
        agent = Agent(instructions="First instructions.")
        async with text_call(model, agent) as (session, recorder):
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            # Live at once: no move to wait for.
            async with asyncio.timeout(1.0):
                await agent.update_instructions("Second instructions.")
            result = await session.run(user_input="hello again")
            result.expect.next_event().is_message(role="assistant")
    record = only_session(emu)
    assert len(record.connections) == 1
    assert [(u.system_instruction, u.outcome) for u in record.context_updates] == [
        ("Second instructions.", "applied")
    ]
    assert record.state is not None and record.state.system_instruction == "Second instructions."
    assert recorder.moves == [] and recorder.errors == []


async def test_history_with_roles_mid_session_on_3_8_asks_for_no_answer() -> None:
    async with Emulator(live38_config(time_scale=0.1, answer_chunks=4)) as emu:
        model = rr.RealtimeModel(
            model=MODEL_38, api_key="test-key", http_options=emu.http_options()
        )
        agent = Agent(instructions="Be brief.")
        async with text_call(model, agent) as (session, recorder):
            rt = agent.realtime_llm_session
            result = await session.run(user_input="hello")
            result.expect.next_event().is_message(role="assistant")
            ctx = rt.chat_ctx.copy()
            ctx.add_message(role="user", content="my name is Ada")
            ctx.add_message(role="assistant", content="hello Ada")
            await rt.update_chat_ctx(ctx)
            result = await session.run(user_input="what is my name")
            result.expect.next_event().is_message(role="assistant")
    record = only_session(emu)
    (conn,) = record.connections
    contents = [m.turns for m in conn.client_messages if m.kind == "client_content"]
    assert (("user", "my name is Ada"), ("model", "hello Ada")) in contents
    assert conn.close_code != 1007
    # Only the two questions were answered: the history asked for nothing.
    assert [t.user_text for t in record.turns.values()] == [
        "hello",
        "my name is Ada hello Ada what is my name",
    ]
    assert recorder.moves == [] and recorder.errors == []


async def test_a_non_blocking_tool_holds_no_move_and_its_result_reaches_the_new_session() -> None:
    release = asyncio.Event()

    @function_tool
    async def lookup(what: str = "") -> str:
        """Look something up."""
        await release.wait()
        return "found"

    agent = Agent(instructions="Be brief.", tools=[lookup])
    async with (
        # An answer long enough that the handle after it comes well after the question, even
        # on a loaded loop: a handle placed before the question's end replays it (heard twice).
        Emulator(live38_config(time_scale=0.1, answer_chunks=30)) as emu,
        voice_call(
            emu,
            agent,
            pace=0.1,
            model=MODEL_38,
            tool_behavior=types.Behavior.NON_BLOCKING,
            tool_response_scheduling=types.FunctionResponseScheduling.WHEN_IDLE,
        ) as call,
    ):
        try:
            call.mic.say(["lookup", "the", "weather"])
            await until(lambda: any(s.tool_calls_issued for s in emu.ledger.sessions.values()))
            # The answer goes on while the tool runs, and a handle follows it.
            await until(
                lambda: any(t.outcome == "complete" for t in only_session(emu).turns.values())
            )
            await until(lambda: len(only_session(emu).handles) >= 1)
            emu.faults.go_away(20.0)
            await until(lambda: len(call.recorder.moves) == 1)
            release.set()
            await until(lambda: len(only_session(emu).tool_results_taken) == 1)
            await until(
                lambda: any(
                    t.answers_result and t.outcome == "complete"
                    for t in only_session(emu).turns.values()
                )
            )
        finally:
            release.set()
    record = only_session(emu)
    served = [c.index for c in record.connections if c.established]
    assert call.recorder.moves[0].report.outcome is MoveOutcome.RESUMED
    assert [(t.connection, t.scheduling) for t in record.tool_results_taken] == [
        (served[-1], "WHEN_IDLE")
    ], record.turns
    assert record.stranded_tool_responses == [] and record.unawaited_tool_responses == []
    summary = emu.ledger.summary().sessions[record.session_id]
    assert summary.answers_cut == () and summary.speech_lost == ()
    assert call.recorder.fatal_errors == []
