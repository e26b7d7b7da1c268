"""The 3.x live models' behaviours, each an emulator switch, over the real SDK: non-blocking
function calls and their scheduling, setup changes in the session, content mid-session."""

from __future__ import annotations

import pytest
from google.genai import types

from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.testing.emulator.conversation import RESULT_TURN_TEXT

from ..transport.transport_helpers import sends_context_updates
from .emu_helpers import (
    MODEL,
    ask,
    audio_ids,
    config,
    function_calls,
    handle_after_turn,
    live_config,
    read_turn,
    read_until,
    read_until_closed,
    say,
)


def _response(
    call: types.FunctionCall, scheduling: types.FunctionResponseScheduling | None
) -> types.FunctionResponse:
    return types.FunctionResponse(
        id=call.id, name=call.name, response={"sky": "blue"}, scheduling=scheduling
    )


async def test_a_blocking_call_holds_the_answer_by_default() -> None:
    async with Emulator(config(answer_chunks=3)) as emu:
        async with emu.client().aio.live.connect(
            model=MODEL, config=live_config(tools=["lookup"])
        ) as session:
            await ask(session, "lookup the weather")
            messages = await read_until(session, lambda m: m.tool_call is not None)
            with pytest.raises(TimeoutError):
                await read_turn(session, timeout=0.3)
    assert audio_ids(messages) == []


@pytest.mark.parametrize(
    ("scheduling", "answers"),
    [
        (None, 1),
        (types.FunctionResponseScheduling.WHEN_IDLE, 1),
        (types.FunctionResponseScheduling.SILENT, 0),
    ],
)
async def test_a_non_blocking_call_lets_the_answer_go_on(
    scheduling: types.FunctionResponseScheduling | None, answers: int
) -> None:
    async with Emulator(config(answer_chunks=3, non_blocking_tools=True)) as emu:
        async with emu.client().aio.live.connect(
            model=MODEL, config=live_config(tools=["lookup"])
        ) as session:
            await ask(session, "lookup the weather")
            messages = await read_turn(session)
            (call,) = function_calls(messages)
            # The whole answer came without the result.
            assert audio_ids(messages) == [(0, 0), (0, 1), (0, 2)]
            await session.send_tool_response(function_responses=[_response(call, scheduling)])
            if answers:
                after = await read_turn(session)
                assert audio_ids(after) == [(1, 0), (1, 1), (1, 2)]
            else:
                with pytest.raises(TimeoutError):
                    await read_turn(session, timeout=0.3)
    record = emu.ledger.sessions[session.session_id]
    taken = record.tool_results_taken
    assert [(t.call_id, t.scheduling) for t in taken] == [
        (call.id, scheduling.value if scheduling else "WHEN_IDLE")
    ]
    result_turns = [t for t in record.turns.values() if t.answers_result is not None]
    assert [(t.answers_result, t.user_text) for t in result_turns] == [
        (call.id, RESULT_TURN_TEXT)
    ] * answers


async def test_an_interrupt_result_cuts_the_answer_in_progress() -> None:
    async with Emulator(config(answer_chunks=40, non_blocking_tools=True)) as emu:
        async with emu.client().aio.live.connect(
            model=MODEL, config=live_config(tools=["lookup"])
        ) as session:
            await ask(session, "lookup the weather")
            (call,) = function_calls(await read_until(session, lambda m: m.tool_call is not None))
            await session.send_tool_response(
                function_responses=[_response(call, types.FunctionResponseScheduling.INTERRUPT)]
            )
            first = await read_turn(session)
            assert any(m.server_content and m.server_content.interrupted for m in first)
            second = await read_turn(session, timeout=5.0)
    assert audio_ids(second) == [(1, k) for k in range(40)]
    turns = emu.ledger.sessions[session.session_id].turns
    assert (turns[0].outcome, turns[1].outcome) == ("interrupted", "complete")


async def test_a_declared_blocking_call_still_holds_its_answer() -> None:
    declared = types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(name="lookup", behavior=types.Behavior.BLOCKING)
                ]
            )
        ],
    )
    async with Emulator(config(answer_chunks=3, non_blocking_tools=True)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=declared) as session:
            await ask(session, "lookup the weather")
            messages = await read_until(session, lambda m: m.tool_call is not None)
            with pytest.raises(TimeoutError):
                await read_turn(session, timeout=0.3)
    assert audio_ids(messages) == []
    assert emu.ledger.sessions[session.session_id].state.running_tools == {}  # type: ignore[union-attr]


async def test_a_running_call_survives_a_resume_and_its_result_is_taken_once() -> None:
    async with Emulator(config(answer_chunks=2, non_blocking_tools=True)) as emu:
        client = emu.client()
        async with client.aio.live.connect(
            model=MODEL, config=live_config(tools=["lookup"])
        ) as session:
            handle = await handle_after_turn(session, "lookup the weather")
        (call_id,) = emu.ledger.sessions[session.session_id].tool_calls_issued
        call = types.FunctionCall(id=call_id, name="lookup", args={})
        cfg = live_config(tools=["lookup"], handle=handle)
        async with client.aio.live.connect(model=MODEL, config=cfg) as resumed:
            await resumed.send_tool_response(function_responses=[_response(call, None)])
            await read_turn(resumed)
            # A second result for the same call answers nothing.
            await resumed.send_tool_response(function_responses=[_response(call, None)])
            with pytest.raises(TimeoutError):
                await read_turn(resumed, timeout=0.3)
    record = emu.ledger.sessions[session.session_id]
    assert [(t.call_id, t.connection) for t in record.tool_results_taken] == [(call_id, 1)]
    assert record.unawaited_tool_responses == [call_id]
    assert record.stranded_tool_responses == []


@sends_context_updates
async def test_a_setup_change_in_the_session_is_refused_by_default() -> None:
    async with Emulator(config()) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await session.send_context_update(system_instruction="be terse")
            code, _ = await read_until_closed(session)
    assert code == 1007
    record = emu.ledger.sessions[session.session_id]
    assert [(u.system_instruction, u.outcome) for u in record.context_updates] == [
        ("be terse", "refused")
    ]


@sends_context_updates
async def test_a_setup_change_in_the_session_is_taken_where_the_model_takes_it() -> None:
    async with Emulator(config(in_session_updates=True)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=live_config()) as session:
            await session.send_context_update(
                system_instruction="be terse",
                tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="g")])],
            )
            await ask(session, "use g")
            messages = await read_until(session, lambda m: m.tool_call is not None)
    assert [c.name for c in function_calls(messages)] == ["g"]
    record = emu.ledger.sessions[session.session_id]
    assert [(u.connection, u.outcome) for u in record.context_updates] == [(0, "applied")]
    assert record.state is not None and record.state.system_instruction == "be terse"
    assert len(record.connections) == 1


def _seeded_history() -> types.LiveConnectConfig:
    return live_config(history_config=types.HistoryConfig(initial_history_in_client_content=True))


HISTORY = [
    types.Content(role="user", parts=[types.Part(text="my name is Ada")]),
    types.Content(role="model", parts=[types.Part(text="hello Ada")]),
]


@pytest.mark.parametrize("mid_session", [False, True])
async def test_content_with_roles_after_realtime_input(mid_session: bool) -> None:
    async with Emulator(config(answer_chunks=2, mid_session_client_content=mid_session)) as emu:
        async with emu.client().aio.live.connect(model=MODEL, config=_seeded_history()) as session:
            await say(session, words=["hi"], speech=2, silence=60)
            await read_turn(session)
            await session.send_client_content(turns=HISTORY, turn_complete=False)
            if not mid_session:
                code, _ = await read_until_closed(session)
                assert code == 1007
                return
            await ask(session, "and again")
            await read_turn(session)
    record = emu.ledger.sessions[session.session_id]
    (content,) = [
        m
        for m in record.connections[0].client_messages
        if m.turns[:1] == (("user", "my name is Ada"),)
    ]
    assert content.turns == (("user", "my name is Ada"), ("model", "hello Ada"))
    assert record.connections[0].close_code != 1007
