"""An OpenAI Realtime call survives its worker: the transport keeps the call in a store (a real
Redis server), and a process that connects with the same session key while the store holds it
takes the call over in a new session given the stored configuration, conversation, input no
item held and function calls in flight. The ``openai`` SDK over real WebSockets to the bundled
emulator (time scaled); its ledger is the ground truth. Lease times are Redis's own (wall
clock: the store's expiry is the server's)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.openai import OpenAIRealtimeOptions, OpenAIRealtimeTransport
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.session_record import RecordError
from realtime_resumption.store import (
    LeaseHeldError,
    LeaseLostError,
    MemoryStore,
    StoreError,
    StoreOptions,
)
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.testing.redis_server import RedisServer
from realtime_resumption.transport import (
    ConnectError,
    NotConnectedError,
    SessionLostError,
    ToolResult,
    TransportError,
)
from tests.openai.transport_helpers import Recorder
from tests.openai_emulator.oai_helpers import config, speech

from .realtime_store_helpers import (
    ASKED,
    CONFIG,
    FINISHED,
    KEY,
    OPTIONS,
    WAIT,
)


def store_transport(
    emu: OpenAIEmulator,
    store: RedisStore,
    *,
    key: str = KEY,
    options: StoreOptions = OPTIONS,
    retry_delays: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0),
) -> OpenAIRealtimeTransport:
    """A transport on ``emu`` keeping its call in ``store`` under ``key``, its dials retried
    after ``retry_delays``."""
    return OpenAIRealtimeTransport(
        emu.client(),
        CONFIG,
        OpenAIRealtimeOptions(websocket_options=emu.websocket_options(), retry_delays=retry_delays),
        store=store,
        session_key=key,
        store_options=options,
    )


async def hand_over_a_word(emu: OpenAIEmulator, store: RedisStore) -> None:
    """A process says a word ("pineapple"), has it answered, and hands the call over."""
    a = store_transport(emu, store)
    rec_a = Recorder(a)
    await a.connect()
    for chunk in speech(0, 5, ["pineapple"]):
        a.send_audio(chunk)
    await rec_a.ended(1, timeout=WAIT)
    await a.hand_over()


async def run_worker_until_killed(emu: OpenAIEmulator, redis_url: str) -> tuple[str, list[int]]:
    """The worker process (``realtime_store_worker``) takes the call, has a word answered,
    leaves a function call open and a question unfinished, says its record holds them, and
    is killed with SIGKILL. Returns the open call's id and the question's chunks it sent."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.openai.realtime_store_worker",
        emu.base_url,
        emu.websocket_base_url,
        emu.ca_file,
        redis_url,
        KEY,
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert worker.stdout is not None
    call_id, sent = "", []
    try:
        async with asyncio.timeout(60):  # the worker imports the SDK and its framework first
            while True:
                line = (await worker.stdout.readline()).decode()
                assert line, "the worker ended"
                if line.startswith("tool "):
                    call_id = line.split()[1]
                elif line.startswith("sent "):
                    sent.append(int(line.split()[1]))
                elif line.startswith("saved"):
                    break
    finally:
        worker.send_signal(signal.SIGKILL)
        await asyncio.wait_for(worker.wait(), 10)
    assert worker.returncode == -signal.SIGKILL
    return call_id, sent


async def test_a_call_whose_worker_was_killed_mid_question_is_taken_over_whole(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with OpenAIEmulator(config()) as emu:
        call_id, asked = await run_worker_until_killed(emu, redis_server.url)
        b = store_transport(emu, redis_store)
        rec = Recorder(b)
        await b.connect()
        # The function call the killed worker never answered is issued again, here.
        (call,) = rec.tool_calls
        assert (call.id, call.name) == (call_id, "lookup")
        b.send_tool_result(ToolResult(call.id, call.name, {"time": "noon"}))
        await rec.ended(1, timeout=WAIT)
        first, count, words = FINISHED
        for chunk in speech(first, count, words):
            b.send_audio(chunk)
        await rec.ended(2, timeout=WAIT)
        for chunk in speech(70, 3, ["recall"]):
            b.send_audio(chunk)
        await rec.ended(3, timeout=WAIT)
        await b.disconnect()
        assert await redis_store.load(KEY) is None  # the call is over: its record is gone

    (move,) = [m for (m,) in rec.named("on_move")]
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.REBUILT)
    assert rec.named("on_move_started") == [(MoveReason.TAKEOVER, move.handle_kind)]
    assert b.taken_over
    killed, taker = emu.ledger.sessions
    # The question the worker started reached no item before the kill; the new session was
    # given it and heard it, finished, once.
    assert asked == list(range(ASKED[0], ASKED[0] + ASKED[1]))
    assert not set(asked) & set(killed.committed_speech)
    question = [*asked, *range(first, first + count)]
    assert [q for q in taker.committed_speech if q in question] == question
    assert emu.ledger.summary().speech_heard_twice == ()
    assert "heard what time is it" in rec.transcript
    # The function was answered once, in the new session, and its result used.
    outputs = [
        item
        for session in emu.ledger.sessions
        for item in session.items
        if item.type == "function_call_output" and item.call_id == call_id
    ]
    assert len(outputs) == 1 and outputs[0] in taker.items
    assert rec.transcript.count("result ") == 1 and "noon" in rec.transcript
    # It came in an answer of its own, as a live call does: frameworks run a call only inside
    # one (LiveKit drops one outside), and the answer to its result ends that answer.
    lifecycle = [
        name
        for name, _ in rec.calls
        if name in ("on_generation_start", "on_tool_call", "on_generation_end")
    ]
    assert lifecycle[:2] == ["on_generation_start", "on_tool_call"]
    assert lifecycle.count("on_generation_start") == lifecycle.count("on_generation_end") == 3
    # A word said to the killed worker is recalled by the new session.
    assert "recall pineapple" in rec.transcript


async def test_a_record_written_for_another_session_key_is_refused_and_the_call_starts_fresh(
    redis_store: RedisStore,
) -> None:
    async with OpenAIEmulator(config()) as emu:
        a = store_transport(emu, redis_store, key="call-a")
        rec_a = Recorder(a)
        await a.connect()
        for chunk in speech(0, 5, ["pineapple"]):
            a.send_audio(chunk)
        await rec_a.ended(1, timeout=WAIT)
        # Handed over: its record stays in the store, whole, for the next process.
        await a.hand_over()
        stored = await redis_store.load("call-a")
        assert stored is not None
        # The record copied under another call's key (a bug, or a forgery): never that call's.
        assert await redis_store.save("call-b", stored[0], 60.0)
        b = store_transport(emu, redis_store, key="call-b")
        rec_b = Recorder(b)
        await b.connect()
        for chunk in speech(20, 3, ["recall"]):
            b.send_audio(chunk)
        await rec_b.ended(1, timeout=WAIT)
        await b.disconnect()

    (refused,) = [e for (e,) in rec_b.named("on_error")]
    assert isinstance(refused.error, RecordError) and refused.recoverable
    assert "another session key" in str(refused.error)
    assert rec_b.named("on_move") == [] and not b.taken_over
    assert "recall pineapple" not in rec_b.transcript


async def test_a_second_process_waits_for_the_held_lease_then_is_refused(
    redis_store: RedisStore,
) -> None:
    async with OpenAIEmulator(config()) as emu:
        a = store_transport(emu, redis_store)
        await a.connect()
        b = store_transport(emu, redis_store, options=StoreOptions(lease_ttl=1.0, lease_wait=0.3))
        # A live process renews its lease: the second one waits ``lease_wait``, then gives up.
        with pytest.raises(LeaseHeldError, match="not taken over twice"):
            await b.connect()
        assert a.is_connected
        assert len(emu.ledger.sessions) == 1  # the refused one never dialled
        await a.disconnect()
        # Once the call ended there, its key is free.
        c = store_transport(emu, redis_store)
        await c.connect()
        assert not c.taken_over
        await c.disconnect()


async def test_a_store_outage_is_reported_recoverable_and_the_call_goes_on(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with OpenAIEmulator(config()) as emu:
        t = store_transport(emu, redis_store)
        rec = Recorder(t)
        await t.connect()
        await redis_server.stop()
        for chunk in speech(0, 5, ["pineapple"]):
            t.send_audio(chunk)
        await rec.ended(1, timeout=WAIT)
        await rec.until(lambda r: bool(r.named("on_error")), timeout=WAIT)
        for chunk in speech(20, 3, ["recall"]):
            t.send_audio(chunk)
        await rec.ended(2, timeout=WAIT)
        assert t.is_connected
        await t.disconnect()

    errors = [e for (e,) in rec.named("on_error")]
    assert errors and all(isinstance(e.error, StoreError) and e.recoverable for e in errors)
    assert len(errors) == 1  # once per outage, not once per beat
    stats = t.store_stats
    assert stats is not None and stats.errors > 1
    assert "recall pineapple" in rec.transcript
    assert rec.named("on_close") == [(1000, "disconnect")]


@pytest.mark.parametrize(
    ("code", "type_"),
    [("insufficient_quota", "insufficient_quota"), (None, "invalid_api_key")],
)
async def test_an_error_that_ends_the_call_is_reported_not_recoverable(
    code: str | None, type_: str
) -> None:
    async with OpenAIEmulator(config()) as emu:
        t = OpenAIRealtimeTransport(
            emu.client(), CONFIG, OpenAIRealtimeOptions(websocket_options=emu.websocket_options())
        )
        rec = Recorder(t)
        await t.connect()
        # One the session goes on after: a client event refused.
        session = emu.ledger.sessions[0]
        assert emu.faults.error("invalid_tool_call_id", "Tool call ID 'x' not found.") == 1
        await rec.until(lambda r: bool(r.named("on_error")), timeout=WAIT)
        assert t.is_connected
        assert emu.faults.error(code, "You exceeded your current quota.", type_=type_) == 1
        await rec.until(lambda r: bool(r.named("on_close")), timeout=WAIT)
        assert not t.is_connected
        await t.disconnect()

    first, fatal = [e for (e,) in rec.named("on_error")]
    assert first.recoverable and isinstance(first.error, TransportError)
    assert not fatal.recoverable and (code or type_) in str(fatal.error)
    assert not isinstance(fatal.error, SessionLostError)
    # No new session was tried: the service would refuse it the same way.
    assert len(emu.ledger.sessions) == 1 and session.closed_at is not None
    assert rec.named("on_move") == [] and rec.named("on_move_started") == []
    ((code_closed, why),) = rec.named("on_close")
    assert code_closed == 1000 and "refused the client" in (why or "")


async def test_a_call_handed_over_mid_question_is_heard_whole_once_by_the_next_process(
    redis_store: RedisStore,
) -> None:
    async with OpenAIEmulator(config()) as emu:
        a = store_transport(emu, redis_store)
        rec_a = Recorder(a)
        await a.connect()
        for chunk in speech(0, 5, ["pineapple"]):
            a.send_audio(chunk)
        await rec_a.ended(1, timeout=WAIT)
        first, count, words = ASKED
        for chunk in speech(first, count, words, silence=0):
            a.send_audio(chunk)
        # The service heard the question start: it waits for its end, in no item yet.
        await rec_a.until(lambda r: len(r.named("on_speech_started")) >= 2, timeout=WAIT)
        await a.hand_over()
        with pytest.raises(NotConnectedError):
            a.send_audio(speech(99, 1)[0])  # nothing is taken once the call is handed over
        b = store_transport(emu, redis_store)
        rec_b = Recorder(b)
        await b.connect()
        rest, more, said = FINISHED
        for chunk in speech(rest, more, said):
            b.send_audio(chunk)
        await rec_b.ended(1, timeout=WAIT)
        await b.disconnect()

    (move,) = [m for (m,) in rec_b.named("on_move")]
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.REBUILT)
    assert move.audio_ms_replayed >= count * 20
    handed, taker = emu.ledger.sessions
    question = [*range(first, first + count), *range(rest, rest + more)]
    assert not set(question) & set(handed.committed_speech)
    assert [q for q in taker.committed_speech if q in question] == question
    assert emu.ledger.summary().speech_heard_twice == ()
    assert "heard what time is it" in rec_b.transcript
    assert rec_a.named("on_close") == [(1000, "disconnect")]


class Clock:
    """The in-memory store's clock, moved by the test (a process stalled past its lease)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_process_that_lost_its_lease_stops_driving_the_call_and_leaves_its_record() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    async with OpenAIEmulator(config()) as emu:
        a = store_transport(emu, store)
        rec = Recorder(a)
        await a.connect()
        for chunk in speech(0, 5, ["pineapple"]):
            a.send_audio(chunk)
        await rec.ended(1, timeout=WAIT)
        # A stalls past its lease (the store's clock jumps) and another process takes it.
        clock.now += OPTIONS.lease_ttl + 1
        assert await store.acquire(KEY, "another process", 60)
        assert await store.save(KEY, b"its record", 60, lease="another process", lease_ttl=60)
        await rec.until(lambda r: bool(r.named("on_close")), timeout=WAIT)
        assert not a.is_connected
        with pytest.raises(NotConnectedError):
            a.send_audio(speech(20, 1)[0])
        stored = await store.load(KEY)
        await a.disconnect()
        assert stored == [b"its record"] and await store.load(KEY) == stored  # the new owner's
        assert not await store.acquire(KEY, "a third process", 60)  # nor its lease released

    ((event,),) = rec.named("on_error")
    assert isinstance(event.error, LeaseLostError) and not event.recoverable
    assert rec.named("on_close") == [(1000, "another process took the call over")]
    (session,) = emu.ledger.sessions
    assert session.closed_by == "client"  # closed at once, not left to the cap


async def test_a_takeover_whose_dial_is_refused_keeps_the_record_for_the_next_attempt(
    redis_store: RedisStore,
) -> None:
    async with OpenAIEmulator(config()) as emu:
        await hand_over_a_word(emu, redis_store)
        stored = await redis_store.load(KEY)
        emu.faults.refuse_dials(503, 2)
        b = store_transport(emu, redis_store, retry_delays=(0.0, 0.1))
        rec_b = Recorder(b)
        with pytest.raises(ConnectError):
            await b.connect()
        assert await redis_store.load(KEY) == stored  # kept, and its lease given up
        c = store_transport(emu, redis_store)
        rec_c = Recorder(c)
        await c.connect()
        for chunk in speech(20, 3, ["recall"]):
            c.send_audio(chunk)
        await rec_c.ended(1, timeout=WAIT)
        await c.disconnect()

    ((started,),) = [args[:1] for args in rec_b.named("on_move_started")]
    (failed,) = [m for (m,) in rec_b.named("on_move")]
    assert started == MoveReason.TAKEOVER
    assert (failed.reason, failed.outcome) == (MoveReason.TAKEOVER, MoveOutcome.LOST)
    assert failed.error is not None and "503" in failed.error
    assert failed.attempts == 2  # both its attempts refused
    (moved,) = [m for (m,) in rec_c.named("on_move")]
    assert (moved.reason, moved.outcome) == (MoveReason.TAKEOVER, MoveOutcome.REBUILT)
    assert "recall pineapple" in rec_c.transcript


async def test_a_takeover_whose_dial_is_refused_twice_is_retried_and_carries_the_call_on(
    redis_store: RedisStore,
) -> None:
    async with OpenAIEmulator(config()) as emu:
        await hand_over_a_word(emu, redis_store)
        emu.faults.refuse_dials(503, 2)
        b = store_transport(emu, redis_store, retry_delays=(0.0, 0.1, 0.2))
        rec_b = Recorder(b)
        await b.connect()
        assert b.taken_over and b.is_connected
        for chunk in speech(20, 3, ["recall"]):
            b.send_audio(chunk)
        await rec_b.ended(1, timeout=WAIT)
        await b.disconnect()
        refused = [status for _, _, status in emu.ledger.refused]

    assert refused == [503, 503]
    ((started,),) = [args[:1] for args in rec_b.named("on_move_started")]
    (moved,) = [m for (m,) in rec_b.named("on_move")]
    assert started == MoveReason.TAKEOVER
    assert (moved.reason, moved.outcome, moved.attempts) == (
        MoveReason.TAKEOVER,
        MoveOutcome.REBUILT,
        3,
    )
    assert len([e for (e,) in rec_b.named("on_error") if e.recoverable]) == 2
    assert "recall pineapple" in rec_b.transcript
