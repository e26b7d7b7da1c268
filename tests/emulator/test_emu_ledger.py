"""The ledger and its summary: what tests and benchmarks count."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from google.genai import types

from realtime_resumption.testing.emulator import Emulator, Ledger, user_audio
from realtime_resumption.testing.emulator.ledger import (
    ClientMessageRecord,
    ConnectionRecord,
    SessionRecord,
)
from realtime_resumption.testing.emulator.snapshot import SessionState

from .emu_helpers import (
    MODEL,
    PCM,
    ask,
    config,
    handle_after_turn,
    live_config,
    read_turn,
    read_until,
)
from .test_emu_handshake import ws_connect


async def send_audio(session, seqs: range) -> None:  # type: ignore[no-untyped-def]
    for seq in seqs:
        data = user_audio(seq, speech=False)
        await session.send_realtime_input(audio=types.Blob(data=data, mime_type=PCM))


async def test_audio_replay_lost_and_duplicates() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
            await send_audio(session, range(4))
        # Break before make: a gap between the two connections.
        await emu.wait_disconnected()
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            await send_audio(s2, range(2, 6))  # replays 2 and 3 only: 0 and 1 are lost
            await send_audio(s2, range(5, 6))  # 5 twice
            await ask(s2, "done")
            await read_turn(s2)
        await emu.wait_disconnected()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.audio_received == (0, 1, 2, 3, 2, 3, 4, 5, 5)
    assert summary.audio_consumed == (2, 3, 4, 5, 5)
    assert summary.audio_lost == (0, 1)
    assert summary.audio_duplicates == (5,)
    assert len(summary.gaps) == 1 and summary.gaps[0] > 0
    (move,) = summary.moves
    assert (move.audio_lost, move.audio_duplicates) == ((0, 1), (5,))
    assert move.input_stall is not None and move.input_stall >= summary.gaps[0]
    assert len(summary.turns) == 2
    assert all(t.produced == t.delivered == 1 and not t.cut for t in summary.turns)
    assert summary.answers_cut == ()
    assert "lost 2" in str(emu.ledger.summary())


async def test_client_messages_are_indexed_per_connection() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=live_config()) as session:
            handle = await handle_after_turn(session)
            await send_audio(session, range(2))
        async with client.aio.live.connect(model=MODEL, config=live_config(handle=handle)) as s2:
            await send_audio(s2, range(2, 3))
            await ask(s2, "x")
            await read_turn(s2)
        await emu.wait_disconnected()
    first, second = emu.ledger.sessions[session.session_id].connections
    assert [(m.index, m.kind, m.audio_seqs) for m in first.client_messages] == [
        (0, "setup", ()),
        (1, "client_content", ()),
        (2, "audio", (0,)),
        (3, "audio", (1,)),
    ]
    assert [m.index for m in second.client_messages] == [0, 1, 2]
    assert second.resumed_handle_index == 0
    times = [m.time for m in first.client_messages + second.client_messages]
    assert times == sorted(times)
    delivered = [m for m in second.server_messages if m.kind == "audio"]
    assert [(m.turn, m.chunk, m.delivered) for m in delivered] == [(1, 0, True)]


async def test_a_tool_response_sent_to_another_session_is_stranded() -> None:
    async with Emulator(config(answer_chunks=1)) as emu:
        client = emu.client()
        cfg = live_config(tools=["f"])
        async with client.aio.live.connect(model=MODEL, config=cfg) as first:
            await ask(first, "f")
            messages = await read_until(first, lambda m: m.tool_call is not None)
        call = messages[-1].tool_call.function_calls[0]  # type: ignore[union-attr,index]
        # A rebuilt session (no handle) receives the result of the old session's call.
        async with client.aio.live.connect(model=MODEL, config=cfg) as rebuilt:
            await rebuilt.send_tool_response(
                function_responses=[types.FunctionResponse(id=call.id, name="f", response={})]
            )
            await asyncio.sleep(0.02)
        await emu.wait_disconnected()
    summaries = emu.ledger.summary().sessions
    assert summaries[rebuilt.session_id].stranded_tool_responses == (call.id,)
    assert summaries[first.session_id].stranded_tool_responses == ()
    assert summaries[first.session_id].answers_cut == (0,)  # closed while awaiting the tool


def _streaming(conn: ConnectionRecord, seqs: range, start: float, every: float = 0.02) -> None:
    for i, seq in enumerate(seqs):
        index = len(conn.client_messages)
        message = ClientMessageRecord(index, "audio", start + i * every, audio_seqs=(seq,))
        conn.client_messages.append(message)


def _connection(
    record: SessionRecord, opened: float, setup: float, closed: float
) -> ConnectionRecord:
    conn = ConnectionRecord(len(record.connections), record.session_id, "/ws", "gemini", opened)
    conn.setup_at, conn.closed_at = setup, closed
    conn.client_messages.append(ClientMessageRecord(0, "setup", opened))
    record.connections.append(conn)
    return conn


def test_a_move_reports_its_input_stall_and_what_it_lost_or_doubled() -> None:
    ledger = Ledger()
    record = ledger.session("s")
    old = _connection(record, 0.0, 0.3, 2.0)
    # A pause long before the move is not the move's stall.
    _streaming(old, range(0, 10), start=0.4)  # 0.40 .. 0.58
    _streaming(old, range(10, 40), start=1.0)  # 1.00 .. 1.58
    new = _connection(record, 1.2, 1.5, 3.0)  # dialled at 1.2, set up at 1.5
    # Input held from 1.58 to 1.9, then replayed from seq 35 (35 to 39 twice; none lost).
    _streaming(new, range(35, 60), start=1.9)
    record.state = SessionState(consumed_audio=[*range(0, 40), *range(35, 60)])
    record.audio_received.extend(
        s for c in record.connections for m in c.client_messages for s in m.audio_seqs
    )
    summary = ledger.summary().sessions["s"]
    (move,) = summary.moves
    assert (move.from_connection, move.to_connection) == (0, 1)
    assert move.input_stall == pytest.approx(0.32)
    # The stream's usual spacing is 20 ms: the move made it 300 ms late.
    assert move.cadence == pytest.approx(0.02) and move.input_lag == pytest.approx(0.30)
    assert move.audio_duplicates == tuple(range(35, 40)) and move.audio_lost == ()
    assert move.gap == pytest.approx(-0.5) and summary.gaps == (move.gap,)
    totals = ledger.summary()
    assert totals.max_input_stall == pytest.approx(0.32) and totals.moves == (move,)
    assert (totals.audio_duplicate_count, totals.audio_lost_count) == (5, 0)
    assert "stall 320 ms (lag 300 ms), lost 0, twice 5" in str(totals)


def test_a_replay_burst_is_not_the_pace_the_input_lag_is_measured_against() -> None:
    ledger = Ledger()
    record = ledger.session("s")
    old = _connection(record, 0.0, 0.3, 2.0)
    # A live stream 20 ms apart on average, 17 or 23 ms apart each time (a real network).
    for seq in range(0, 20):
        at = 0.4 + 0.02 * seq + (0.003 if seq % 2 else 0.0)
        old.client_messages.append(
            ClientMessageRecord(len(old.client_messages), "audio", at, audio_seqs=(seq,))
        )
    new = _connection(record, 0.5, 0.8, 3.0)
    # Switched at 0.8: seqs 0..19 replayed in a 1 ms burst, then the live stream goes on.
    _streaming(new, range(0, 20), start=0.8, every=0.001)
    _streaming(new, range(20, 24), start=0.84)
    record.state = SessionState(consumed_audio=[*range(0, 24)])
    (move,) = ledger.summary().sessions["s"].moves
    # Over every arrival, the burst's 1 ms gaps would pull the median down to 17 ms.
    assert move.cadence == pytest.approx(0.02)
    assert move.input_stall is not None and move.input_lag == pytest.approx(move.input_stall - 0.02)


def test_audio_lost_is_charged_to_the_move_that_lost_it() -> None:
    ledger = Ledger()
    record = ledger.session("s")
    first = _connection(record, 0.0, 0.3, 1.0)
    _streaming(first, range(0, 10), start=0.4)
    second = _connection(record, 1.0, 1.3, 2.0)
    _streaming(second, range(10, 20), start=1.4)  # 10..14 never reach the third
    third = _connection(record, 2.0, 2.3, 3.0)
    _streaming(third, range(15, 20), start=2.4)
    record.state = SessionState(consumed_audio=[*range(0, 10), *range(15, 20)])
    record.audio_received.extend(
        s for c in record.connections for m in c.client_messages for s in m.audio_seqs
    )
    first_move, second_move = ledger.summary().sessions["s"].moves
    assert first_move.audio_lost == () and second_move.audio_lost == tuple(range(10, 15))
    assert first_move.input_stall == pytest.approx(1.4 - 0.58)
    # No audio around a move, no stall to report.
    quiet = Ledger()
    q = quiet.session("q")
    _connection(q, 0.0, 0.3, 1.0)
    _connection(q, 1.0, 1.3, 2.0)
    (move,) = quiet.summary().sessions["q"].moves
    assert move.input_stall is None and quiet.summary().max_input_stall is None
    assert move.input_lag is None


async def test_a_handle_records_the_input_that_reached_the_server_unread() -> None:
    """A handle issued while client messages wait, unread, at the server: its snapshot lacks
    them though they arrived before it, and the ledger says which (``input_waiting`` after
    ``consumed_through``). Five audio messages sent with the setup wait through its latency;
    the update that follows setupComplete is issued before they are read."""
    setup = json.dumps({"setup": {"model": "models/m", "sessionResumption": {}}})
    async with (
        Emulator(config(update_after_setup=True, setup_latency=20.0)) as emu,
        ws_connect(emu) as ws,
    ):
        await ws.send(setup)
        for seq in range(5):
            data = base64.b64encode(user_audio(seq, speech=True)).decode()
            await ws.send(json.dumps({"realtimeInput": {"audio": {"data": data, "mimeType": PCM}}}))
        async with asyncio.timeout(5):
            assert "setupComplete" in json.loads(await ws.recv())
            assert "sessionResumptionUpdate" in json.loads(await ws.recv())
    ((handle,),) = [r.handles for r in emu.ledger.sessions.values()]
    assert (handle.consumed_through, handle.input_waiting) == (0, 5)
    assert handle.snapshot.consumed_audio == ()
