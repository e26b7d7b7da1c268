"""The generation lifecycle over the real SDK, against the emulator, in both profiles."""

from __future__ import annotations

from typing import Any

from realtime_resumption.testing.emulator import Emulator, answer_chunk_id, user_audio
from realtime_resumption.transport import (
    CancelResponseOptions,
    ContentTurn,
    GenerationEndReason,
    ToolResult,
)

from .transport_helpers import Recorder, emulator_config, make_transport

HELLO = [ContentTurn("user", "hello there")]


def _pairs(rec: Recorder) -> list[tuple[str, str]]:
    """(start|end, generation id) in order."""
    out = []
    for name, args in rec.events:
        if name == "on_generation_start":
            out.append(("start", args[0]))
        elif name == "on_generation_end":
            out.append(("end", args[0]))
    return out


def _assert_paired(rec: Recorder) -> None:
    pairs = _pairs(rec)
    assert len(pairs) % 2 == 0, pairs
    for i in range(0, len(pairs), 2):
        assert pairs[i][0] == "start" and pairs[i + 1] == ("end", pairs[i][1]), pairs
    starts = [gid for kind, gid in pairs if kind == "start"]
    assert len(starts) == len(set(starts))
    # Model-turn start comes once per generation, with the generation's id.
    assert [a[0] for a in rec.of("on_model_turn_start")] == starts


async def test_normal_answer_pairs_start_and_end_once(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_generation_end")
    await transport.disconnect()

    _assert_paired(rec)
    assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.GENERATION_COMPLETE)]
    assert rec.count("on_first_audio_chunk") == 1
    chunks = [answer_chunk_id(args[0]) for args in rec.of("on_audio_output")]
    assert chunks == [(0, k) for k in range(emu.config.answer_chunks)]
    # First audio is reported before the first chunk is delivered, after the generation opened.
    names = rec.names("on_generation_start", "on_first_audio_chunk", "on_audio_output")
    assert names[:3] == ["on_generation_start", "on_first_audio_chunk", "on_audio_output"]
    assert rec.of("on_turn_complete") == [(1,)]
    assert rec.names("on_turn_complete", "on_generation_end") == [
        "on_turn_complete",
        "on_generation_end",
    ]
    assert "".join(a[0] for a in rec.of("on_output_transcription")).count("[0.") == 10


async def test_first_audio_chunk_once_per_response(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    for n in range(1, 3):
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end", n)
    await transport.disconnect()
    assert rec.count("on_first_audio_chunk") == 2
    first_audio_at = [i for i, n in enumerate(rec.names()) if n == "on_first_audio_chunk"]
    starts_at = [i for i, n in enumerate(rec.names()) if n == "on_generation_start"]
    assert all(s < f for s, f in zip(starts_at, first_audio_at, strict=True))


async def test_server_turn_ids_are_monotonic_and_active_only_during_a_turn(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    seen_during: list[int | None] = []
    record_audio = transport.on_audio_output

    def on_audio(data: bytes) -> None:
        seen_during.append(transport.get_active_server_turn_id())
        assert record_audio is not None
        record_audio(data)

    transport.on_audio_output = on_audio
    await transport.connect()
    assert transport.get_active_server_turn_id() is None
    between: list[int | None] = []
    for n in range(1, 4):
        transport.send_content(HELLO)
        await rec.wait_for("on_turn_complete", n)
        between.append(transport.get_active_server_turn_id())
    await transport.disconnect()

    completed = [args[0] for args in rec.of("on_turn_complete")]
    assert completed == [1, 2, 3]
    assert between == [None, None, None]
    assert sorted(set(seen_during)) == [1, 2, 3]
    assert seen_during == sorted(seen_during)


async def test_text_only_answer_reports_text_done_before_turn_complete(profile: str) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        transport = make_transport(emu, response_modality="text")
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end")
        await transport.disconnect()

    _assert_paired(rec)
    assert rec.count("on_audio_output") == 0
    assert rec.count("on_first_audio_chunk") == 0
    text = "".join(args[0] for args in rec.of("on_text_output"))
    assert text.count("[0.") == emu.config.answer_chunks
    order = rec.names("on_text_output", "on_text_done", "on_turn_complete")
    assert order[-2:] == ["on_text_done", "on_turn_complete"]
    assert order.count("on_text_done") == 1


async def test_interrupted_answer_ends_once_as_interrupted(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=200)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 3)
        transport.send_audio(user_audio(1, speech=True))
        await rec.wait_for("on_interrupted")
        await rec.wait_for("on_turn_complete")
        await transport.disconnect()

    _assert_paired(rec)
    assert rec.of("on_generation_end")[0] == ("gen_1", GenerationEndReason.INTERRUPTED)
    (interrupted_turn,) = rec.of("on_interrupted")
    assert rec.of("on_turn_complete")[0] == interrupted_turn
    assert rec.count("on_audio_output") < 200


async def test_answer_ending_in_a_tool_call_is_one_generation(emu: Emulator) -> None:
    transport = make_transport(emu, tools=[{"name": "lookup"}])
    rec = Recorder(transport)

    def answer(calls: Any) -> None:
        for call in calls:
            transport.send_tool_result(ToolResult(call.id, call.name, {"result": "42"}))

    await transport.connect()
    transport.on_tool_call = answer
    transport.send_content([ContentTurn("user", "please lookup the weather")])
    await rec.wait_for("on_generation_end")
    await transport.disconnect()

    _assert_paired(rec)
    assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.GENERATION_COMPLETE)]
    assert rec.count("on_audio_output") == emu.config.answer_chunks
    summary = next(iter(emu.ledger.summary().sessions.values()))
    assert summary.stranded_tool_responses == ()
    assert summary.answers_cut == ()


async def test_cancelled_answer_is_silenced_and_ends_as_cancelled(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=60)) as emu:
        transport = make_transport(emu)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 2)
        await transport.cancel_response(CancelResponseOptions(wait_for_done=True))
        delivered = rec.count("on_audio_output")
        await transport.cancel_response()  # idempotent, and calls nothing
        assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.CANCELLED)]
        # The next answer is delivered again.
        transport.send_content(HELLO)
        await rec.wait_for("on_generation_end", 2)
        await transport.disconnect()

    _assert_paired(rec)
    assert rec.count("on_interrupted") == 0
    first_turn = [args[0] for args in rec.of("on_audio_output")[:delivered]]
    assert [answer_chunk_id(c) for c in first_turn] == [(0, k) for k in range(delivered)]
    later = [answer_chunk_id(args[0]) for args in rec.of("on_audio_output")[delivered:]]
    assert later == [(1, k) for k in range(60)]


async def test_connection_closed_mid_answer_ends_the_generation_once(profile: str) -> None:
    async with Emulator(emulator_config(profile, answer_chunks=200)) as emu:
        # Without rotation the drop ends the session (with it, the session moves on).
        transport = make_transport(emu, rotation=False)
        rec = Recorder(transport)
        await transport.connect()
        transport.send_content(HELLO)
        await rec.wait_for("on_audio_output", 2)
        assert emu.faults.drop() == 1
        await rec.wait_for("on_close")
        await transport.disconnect()

    _assert_paired(rec)
    assert rec.of("on_generation_end") == [("gen_1", GenerationEndReason.DISCONNECTED)]
    assert rec.of("on_close") == [(1006, rec.of("on_close")[0][1])]
    closes = [e for (e,) in rec.of("on_connection_lifecycle") if e.kind == "generation-close"]
    assert [(c.code, c.connect_attempt_id) for c in closes] == [(1006, "att_1")]
    assert not transport.is_connected


async def test_input_transcription_arrives_as_deltas(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_audio(user_audio(1, word="hello"))
    transport.send_audio(user_audio(2, word="world"))
    for seq in range(3, 6):
        transport.send_audio(user_audio(seq, speech=False))
    await rec.wait_for("on_generation_end")
    await transport.disconnect()

    deltas = [args[0] for args in rec.of("on_input_transcription")]
    assert deltas == ["hello", " world"]
    assert "".join(deltas) == "hello world"
    summary = next(iter(emu.ledger.summary().sessions.values()))
    assert summary.audio_received == (1, 2, 3, 4, 5)


async def test_usage_is_reported_raw_and_normalised_with_its_turn(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete")
    await transport.disconnect()

    ((raw,),) = rec.of("on_usage_metadata")
    assert raw.prompt_token_count == 3
    assert raw.total_token_count == 13
    assert raw.raw["response_token_count"] == 10
    ((usage,),) = rec.of("on_realtime_llm_usage")
    assert (usage.phase, usage.output_tokens, usage.server_turn_id) == ("final", 10, 1)
    assert usage.server_turn_winding_down
    assert rec.names("on_usage_metadata", "on_turn_complete") == [
        "on_usage_metadata",
        "on_turn_complete",
    ]


async def test_quiesce_stops_audio_until_unquiesce(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    await transport.connect()
    await transport.quiesce()
    await transport.quiesce()
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete")
    assert rec.count("on_audio_output") == 0
    assert rec.count("on_first_audio_chunk") == 0
    await transport.unquiesce()
    transport.send_content(HELLO)
    await rec.wait_for("on_turn_complete", 2)
    await transport.disconnect()
    assert rec.count("on_audio_output") == emu.config.answer_chunks
    _assert_paired(rec)


async def test_a_raising_callback_does_not_stop_the_receive_loop(emu: Emulator) -> None:
    transport = make_transport(emu)
    rec = Recorder(transport)
    calls = 0

    def boom(data: bytes) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("framework bug")

    await transport.connect()
    transport.on_audio_output = boom
    transport.send_content(HELLO)
    await rec.wait_for("on_generation_end")
    transport.send_content(HELLO)
    await rec.wait_for("on_generation_end", 2)
    await transport.disconnect()
    assert calls == 2 * emu.config.answer_chunks
    _assert_paired(rec)
