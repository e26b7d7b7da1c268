"""Faults: the cap's 1001 close (each profile's, time-scaled), drops, refused dials, a slow
``session.created``."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from realtime_resumption.testing.openai_emulator import OpenAIEmulator, cap_reason

from .oai_helpers import config, connect, say, speech, until


async def _read_to_the_end(conn: object) -> list[str]:
    kinds = []
    async with asyncio.timeout(10):
        async for event in conn:  # type: ignore[attr-defined]
            kinds.append(event.type)
    return kinds


@pytest.mark.parametrize(("profile", "minutes"), [("openai", 60), ("azure", 30)])
async def test_the_cap_closes_1001_with_the_services_reason(profile: str, minutes: int) -> None:
    scale = 0.0004
    async with OpenAIEmulator(config(profile=profile, time_scale=scale)) as emu:
        async with connect(emu) as conn:
            # The SDK's iteration ends cleanly: 1001 is a ConnectionClosedOK.
            kinds = await _read_to_the_end(conn)
        assert kinds == ["session.created"]
        await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.closed_by == "cap" and record.close_code == 1001
    assert record.close_reason == f"Your session hit the maximum duration of {minutes} minutes."
    assert record.created_at is not None and record.closed_at is not None
    assert record.closed_at - record.created_at >= minutes * 60 * scale


async def test_a_client_reads_the_cap_close_code_and_reason() -> None:
    async with OpenAIEmulator(config(session_cap=60.0)) as emu:
        ctx = emu.client_ssl_context()
        headers = {"Authorization": "Bearer sk-test"}
        async with websockets.connect(
            emu.realtime_url + "?model=gpt-realtime", ssl=ctx, additional_headers=headers
        ) as ws:
            async with asyncio.timeout(5):
                async for _ in ws:
                    pass
            assert ws.close_code == 1001 and ws.close_reason == cap_reason(60.0)


async def test_the_older_service_warned_with_session_expired_before_the_close() -> None:
    async with OpenAIEmulator(config(session_cap=30.0, cap_error_event=True)) as emu:
        async with connect(emu) as conn:
            kinds = await _read_to_the_end(conn)
        assert kinds == ["session.created", "error"]
    assert emu.ledger.sessions[0].errors == [
        ("session_expired", "Your session hit the maximum duration of 0.5 minutes.")
    ]


async def test_a_cap_mid_answer_cuts_it_and_loses_the_uncommitted_speech() -> None:
    cfg = config(session_cap=100.0, answer_chunks=1000)
    async with OpenAIEmulator(cfg) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            # Speech over the answer must not cancel it here: the cap is what cuts it.
            detection = {"type": "server_vad", "interrupt_response": False}
            await conn.session.update(
                session={"type": "realtime", "audio": {"input": {"turn_detection": detection}}}
            )
            await say(conn, speech(0, 5, ["question"]))
            await until(conn, "response.output_audio.delta")
            await say(conn, speech(5, 3, silence=0))  # speech still going at the cap
            await _read_to_the_end(conn)
        await emu.wait_disconnected()
    summary = emu.ledger.summary()
    assert summary.answers_cut == 1 and summary.answers_complete == 0
    assert summary.speech_committed == (0, 1, 2, 3, 4)
    assert summary.speech_uncommitted == (5, 6, 7)
    assert summary.speech_lost(range(8)) == [5, 6, 7]  # type: ignore[arg-type]


async def test_a_drop_is_an_abrupt_1006_and_cuts_the_answer() -> None:
    async with OpenAIEmulator(config(answer_chunks=1000)) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            await say(conn, speech(0, 5))
            await until(conn, "response.output_audio.delta")
            assert emu.faults.drop() == 1
            with pytest.raises(ConnectionClosedError) as closed:
                await until(conn, "never")
            assert closed.value.rcvd is None  # no close frame: 1006
        await emu.wait_disconnected()
    record = emu.ledger.sessions[0]
    assert record.closed_by == "drop" and record.close_code == 1006
    assert record.answers[0].outcome == "cut"
    assert 0 < record.answers[0].delivered <= record.answers[0].produced


async def test_a_bad_key_is_refused_401_and_starts_no_session() -> None:
    async with OpenAIEmulator(config(api_key="sk-right")) as emu:
        client = emu.client(api_key="sk-wrong")
        with pytest.raises(InvalidStatus) as refused:
            async with client.realtime.connect(
                model="gpt-realtime", websocket_connection_options=emu.websocket_options()
            ):
                pass
        assert refused.value.response.status_code == 401
        assert b"invalid_api_key" in refused.value.response.body
        assert b"sk-wrong" not in refused.value.response.body
        async with connect(emu) as conn:  # the configured key is taken
            await until(conn, "session.created")
    assert [status for _, _, status in emu.ledger.refused] == [401]
    assert len(emu.ledger.sessions) == 1


async def test_refused_dials_429_then_a_dial_that_works() -> None:
    async with OpenAIEmulator(config()) as emu:
        emu.faults.refuse_dials(429, count=2)
        for _ in range(2):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(emu):
                    pass
            assert refused.value.response.status_code == 429
            assert b"insufficient_quota" in refused.value.response.body
        async with connect(emu) as conn:
            await until(conn, "session.created")
    assert [status for _, _, status in emu.ledger.refused] == [429, 429]


async def test_a_slow_session_created_and_events_sent_before_it_wait() -> None:
    async with OpenAIEmulator(config(time_scale=0.1)) as emu:
        emu.faults.slow_session_created(3.0)
        async with connect(emu) as conn:
            await conn.session.update(session={"type": "realtime", "instructions": "early"})
            events = await until(conn, "session.updated")
            assert [e.type for e in events] == ["session.created", "session.updated"]
            assert events[1].session.instructions == "early"
        async with connect(emu) as conn:
            await until(conn, "session.created")
    slow, prompt = emu.ledger.sessions
    assert slow.created_at is not None and prompt.created_at is not None
    assert slow.created_at - slow.opened_at >= 0.3
    assert prompt.created_at - prompt.opened_at < 0.3


async def test_a_scripted_close_reaches_the_client() -> None:
    async with OpenAIEmulator(config()) as emu:
        async with connect(emu) as conn:
            await until(conn, "session.created")
            assert emu.faults.close(1011, "Internal error") == 1
            with pytest.raises(ConnectionClosedError):
                await until(conn, "never")
    assert emu.ledger.sessions[0].close_code == 1011
