"""A worker process told to stop (SIGTERM, as at a deploy or a scale-down) hands its call over
with ``hand_over_on``: a real subprocess talking to the emulator over real TLS and keeping its
call in a real Redis server is sent SIGTERM mid-speech; it ends as SIGTERM ends a process, and
the next process takes the call over at once, with none of the speech it accepted lost."""

from __future__ import annotations

import asyncio
import signal

import pytest
from loguru import logger

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import MemoryStore, hand_over_on
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.testing.redis_server import RedisServer

from ..transport.transport_helpers import Recorder, answered_with_handle, emulator_config
from .takeover_helpers import make_transport, start_worker, stream_speech, take_over_and_talk


async def run_worker_until_terminated(emu: Emulator, redis_server: RedisServer) -> list[int]:
    """A worker (``tests/store/worker.py drain``) takes the call and talks; after 50 chunks it
    is sent SIGTERM. Returns the seqs of every chunk its transport accepted."""
    worker = await start_worker("drain", emu, redis_server.url)
    assert worker.stdout is not None
    sent: list[int] = []
    try:
        async with asyncio.timeout(60):  # the worker imports google-genai first
            while len(sent) < 50:
                line = (await worker.stdout.readline()).decode()
                assert line, "the worker ended"
                sent.append(int(line.split()[1]))
            worker.send_signal(signal.SIGTERM)
            # It talks on until the hand-over takes no more input, then ends.
            while line := (await worker.stdout.readline()).decode():
                sent.append(int(line.split()[1]))
            await worker.wait()
    finally:
        if worker.returncode is None:
            worker.kill()
            await asyncio.wait_for(worker.wait(), 10)
    assert worker.returncode == -signal.SIGTERM  # it ended as SIGTERM ends a process
    return sent


async def test_a_worker_sent_sigterm_hands_its_call_over_with_no_speech_lost(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        sent = await run_worker_until_terminated(emu, redis_server)
        # At once: the lease was given up (no wait for it to expire).
        options = StoreOptions(write_interval=0.25, lease_wait=0.0)
        rec_b = await take_over_and_talk(emu, redis_store, 2000, options)

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()  # the same server session
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == ()
    assert set(sent) | set(range(2000, 2010)) <= set(summary.audio_consumed)
    assert rec_b.count("on_error") == 0


async def test_the_signal_hands_over_every_call_of_the_collection_then_runs_then() -> None:
    """In this process: the handler reads the app's set of calls when the signal comes, hands
    each over (one already over is skipped), runs ``then`` instead of ending the process, and
    ignores a second signal meanwhile."""
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        calls: set[GeminiLiveTransport] = set()
        done = asyncio.Event()
        ran: list[str] = []

        def then() -> None:
            ran.append("then")
            done.set()

        uninstall = hand_over_on(signal.SIGUSR1, calls, within=10, then=then)
        try:
            a = make_transport(emu, store)
            ended = make_transport(emu, MemoryStore())
            await a.connect()
            await answered_with_handle(a, Recorder(a))  # the session's first handle
            await stream_speech(a, 1, 10)
            calls.update({a, ended})  # added after installing: read at the signal
            signal.raise_signal(signal.SIGUSR1)
            signal.raise_signal(signal.SIGUSR1)
            async with asyncio.timeout(10):
                await done.wait()
        finally:
            uninstall()
        assert ran == ["then"]
        assert not a.is_connected
        b = make_transport(emu, store, StoreOptions(lease_wait=0.0))
        rec_b = Recorder(b)
        await b.connect()
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    assert emu.ledger.summary().sessions[session.session_id].speech_lost == ()


async def test_a_bound_that_is_not_a_positive_number_is_refused() -> None:
    with pytest.raises(ValueError, match="finite number"):
        hand_over_on(signal.SIGUSR1, [], within=0)


async def test_a_then_that_fails_is_logged_and_the_handler_stays_sound() -> None:
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    done = asyncio.Event()

    def then() -> None:
        done.set()
        raise RuntimeError("the app's stop failed")

    uninstall = hand_over_on(signal.SIGUSR1, [], within=1, then=then)
    try:
        signal.raise_signal(signal.SIGUSR1)
        async with asyncio.timeout(5):
            await done.wait()
        async with asyncio.timeout(5):
            while not warnings:  # noqa: ASYNC110  # the handler's task logs right after
                await asyncio.sleep(0.01)
    finally:
        uninstall()
        logger.remove(sink)
    assert warnings == ["SIGUSR1: then= failed (RuntimeError: the app's stop failed)"]
