"""Each connection's setup in the ledger, and a resumed session under its new setup."""

from __future__ import annotations

import pytest
from google.genai import errors, types

from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.testing.emulator.ledger import SetupRecord
from realtime_resumption.testing.emulator.server import VERTEX_LOCATION, VERTEX_PROJECT

from ..transport.transport_helpers import sends_context_updates
from .emu_helpers import (
    MODEL,
    ask,
    config,
    function_calls,
    handle_after_turn,
    live_config,
    read_until,
    read_until_closed,
)


def setup_config(
    instruction: str, tools: list[str], voice: str, **extra: object
) -> types.LiveConnectConfig:
    return live_config(
        tools=tools,
        system_instruction=instruction,
        speech_config=types.SpeechConfig(
            voice_config=types.VoiceConfig(
                prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=voice)
            )
        ),
        **extra,
    )


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_resume_takes_the_new_setup_and_the_ledger_records_both(profile: str) -> None:
    vertex = profile == "vertex"
    async with Emulator(config(profile=profile, answer_chunks=1)) as emu:
        client = emu.client(vertex=vertex)
        transparent = True if vertex else None
        first = setup_config("be terse", ["lookup"], "Puck", transparent=transparent)
        async with client.aio.live.connect(model=MODEL, config=first) as session:
            handle = await handle_after_turn(session)
        second = setup_config("be kind", ["book"], "Kore", handle=handle, transparent=transparent)
        async with client.aio.live.connect(model=MODEL, config=second) as resumed:
            assert resumed.session_id == session.session_id
            await ask(resumed, "lookup then book")
            messages = await read_until(resumed, lambda m: m.tool_call is not None)
        await emu.wait_disconnected()

    assert [c.name for c in function_calls(messages)] == [
        "book"
    ]  # only the new setup's tools exist
    record = emu.ledger.sessions[session.session_id]
    setups = [c.setup for c in record.connections]
    model = (
        f"projects/{VERTEX_PROJECT}/locations/{VERTEX_LOCATION}/publishers/google/models/{MODEL}"
        if vertex
        else f"models/{MODEL}"
    )
    assert setups == [
        SetupRecord(
            model=model,
            system_instruction="be terse",
            tools=("lookup",),
            voice="Puck",
            response_modalities=("AUDIO",),
            resumption=True,
            with_handle=False,
            transparent=vertex,
        ),
        SetupRecord(
            model=model,
            system_instruction="be kind",
            tools=("book",),
            voice="Kore",
            response_modalities=("AUDIO",),
            resumption=True,
            with_handle=True,
            transparent=vertex,
        ),
    ]
    assert record.state is not None
    assert (record.state.system_instruction, record.state.functions, record.state.voice) == (
        "be kind",
        ("book",),
        "Kore",
    )
    # The handle stands for the session as it was: the old setup.
    assert record.handles[0].snapshot.system_instruction == "be terse"


async def test_a_refused_connection_still_records_its_setup() -> None:
    async with Emulator(config()) as emu:
        cfg = setup_config("x", [], "Puck", handle="no-such-handle", text=True)
        with pytest.raises(errors.APIError):
            async with emu.client().aio.live.connect(model=MODEL, config=cfg):
                pass
        await emu.wait_disconnected()
    ((conn,),) = [r.connections for r in emu.ledger.sessions.values()]
    assert conn.refused == "handle" and conn.setup is not None
    assert conn.setup.with_handle and conn.setup.response_modalities == ("TEXT",)
    assert conn.setup.tools == () and conn.setup.voice == "Puck"


@sends_context_updates
async def test_a_session_may_ignore_a_new_instruction() -> None:
    async with Emulator(config(instruction_change="ignore", in_session_updates=True)) as emu:
        client = emu.client()
        async with client.aio.live.connect(
            model=MODEL, config=setup_config("be terse", [], "Puck")
        ) as session:
            handle = await handle_after_turn(session)
        cfg = setup_config("be kind", ["book"], "Kore", handle=handle)
        async with client.aio.live.connect(model=MODEL, config=cfg) as resumed:
            await resumed.send_context_update(system_instruction="be loud")
            await ask(resumed, "book it")
            messages = await read_until(resumed, lambda m: m.tool_call is not None)
        await emu.wait_disconnected()
    assert [c.name for c in function_calls(messages)] == ["book"]
    record = emu.ledger.sessions[session.session_id]
    assert record.state is not None
    assert (record.state.system_instruction, record.state.voice) == ("be terse", "Kore")
    assert record.connections[1].setup is not None
    assert record.connections[1].setup.system_instruction == "be kind"


@sends_context_updates
async def test_a_session_may_refuse_a_new_instruction() -> None:
    async with Emulator(config(instruction_change="refuse", in_session_updates=True)) as emu:
        client = emu.client()
        async with client.aio.live.connect(
            model=MODEL, config=setup_config("be terse", [], "Puck")
        ) as session:
            handle = await handle_after_turn(session)
        with pytest.raises(errors.APIError) as caught:
            cfg = setup_config("be kind", [], "Puck", handle=handle)
            async with client.aio.live.connect(model=MODEL, config=cfg):
                pass
        assert caught.value.code == 1007
        # The same instruction resumes; a new one through contextUpdate closes the connection.
        cfg = setup_config("be terse", [], "Kore", handle=handle)
        async with client.aio.live.connect(model=MODEL, config=cfg) as resumed:
            await resumed.send_context_update(system_instruction="be terse")
            await resumed.send_context_update(system_instruction="be kind")
            code, _ = await read_until_closed(resumed)
        await emu.wait_disconnected()
    assert code == 1007
    connections = emu.ledger.sessions[session.session_id].connections
    assert [c.refused for c in connections] == [None, "instruction", None]
    assert [c.close_code for c in connections] == [1000, 1007, 1007]
