"""A call survives its worker: process A talks and dies mid-call; process B, with the same
session key, takes the call over from the store: the same server session (resumed, not
fresh), the user's speech kept but for at most one write interval, against the emulator over
real TLS and a real Redis server."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from realtime_resumption.emulator import Emulator
from realtime_resumption.moves import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import MemoryStore

from ..transport.transport_helpers import Recorder, emulator_config
from .redis_server import RedisServer
from .takeover_helpers import CHUNK, KEY, OPTIONS, crash, make_transport, stream_speech


async def test_a_call_taken_over_after_a_crash_resumes_its_session_and_keeps_the_speech(
    redis_store: RedisStore,
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, redis_store)
        rec_a = Recorder(a)
        await a.connect()
        await rec_a.wait_for("on_resumption_update")
        await stream_speech(a, 1, 60)
        await crash(a)
        # B starts while A's lease is still held: it waits (bounded) for it to expire.
        b = make_transport(emu, redis_store)
        rec_b = Recorder(b)
        await b.connect()
        await stream_speech(b, 61, 10)
        await asyncio.sleep(0.1)
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome, move.handle_kind) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
        HandleKind.AFTER_TURN,
    )
    assert move.messages_replayed > 0
    (session,) = emu.ledger.sessions.values()  # resumed: no second server session
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.connections == 2
    lost = summary.speech_lost
    # At most one write interval of the user's speech, and only the last one before the crash.
    assert len(lost) * CHUNK <= OPTIONS.write_interval + CHUNK
    assert all(seq > 60 - (OPTIONS.write_interval / CHUNK) - 1 for seq in lost)
    assert set(range(61, 71)) <= set(summary.audio_consumed)
    assert rec_b.count("on_error") == 0
    assert await redis_store.load(KEY) is None  # B's call ended: nothing left to take over


async def test_a_second_process_is_refused_while_the_first_drives_the_call() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        await a.connect()
        from realtime_resumption.gemini.config import StoreOptions
        from realtime_resumption.store import LeaseHeldError

        b = make_transport(emu, store, StoreOptions(lease_wait=0.0))
        dialled = len(emu.ledger.attempts)
        try:
            await b.connect()
        except LeaseHeldError as error:
            assert KEY in str(error)
        else:
            raise AssertionError("B drove A's call")
        assert len(emu.ledger.attempts) == dialled  # B never dialled
        assert not b.is_connected
        await a.disconnect()
        await b.connect()  # A's call ended: the key is free (a new call)
        await b.disconnect()


async def test_a_call_survives_its_worker_killed_with_sigkill(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.store.worker",
            emu.base_url,
            emu.ca_file,
            redis_server.url,
            KEY,
            "200",
            stdout=asyncio.subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        assert worker.stdout is not None
        try:
            async with asyncio.timeout(60):  # the worker imports google-genai first
                while (await worker.stdout.readline()).strip() != b"sent 60":
                    pass
        finally:
            worker.send_signal(signal.SIGKILL)
            await asyncio.wait_for(worker.wait(), 10)
        assert worker.returncode == -signal.SIGKILL
        b = make_transport(emu, redis_store)
        rec_b = Recorder(b)
        await b.connect()
        await stream_speech(b, 1000, 10)
        await asyncio.sleep(0.1)
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.connections == 2
    sent = set(range(1, 61))  # at least these were written when it died (maybe a few more)
    lost = set(summary.speech_lost)
    assert len(lost) * CHUNK <= OPTIONS.write_interval + 2 * CHUNK
    assert len(sent - set(summary.audio_consumed)) * CHUNK <= OPTIONS.write_interval + CHUNK
    assert set(range(1000, 1010)) <= set(summary.audio_consumed)
