"""The store under faults and attack: Redis back empty after a short gap, a worker stopped past
its lease while another takes its call over, a hand-over asked for twice at once, a crash
taken over with the default options, a record copied under another call's key or nested past
reason. A real Redis server (killed, started again, empty, as a Redis that does not persist
comes back) and the strict emulator over real TLS."""

from __future__ import annotations

import asyncio
import signal

import pytest
from cryptography.fernet import Fernet

from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.gemini.stored_session import RECORD_VERSION, RecordCodec, RecordError
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import LeaseHeldError, LeaseLostError, MemoryStore, StoreError
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.testing.emulator.ledger import ConnectionRecord
from realtime_resumption.testing.redis_server import RedisServer
from realtime_resumption.transport import DialAbandonedError, NotConnectedError

from ..livekit.lk_helpers import until
from ..transport.transport_helpers import Recorder, answered_with_handle, emulator_config
from .conftest import Clock
from .takeover_helpers import (
    KEY,
    OPTIONS,
    answered_call,
    crash,
    current,
    make_transport,
    saved,
    start_worker,
    stream_speech,
    take_over_and_talk,
)

CURRENT_WITHIN = 1.0
"""Seconds after Redis returns within which the record holds the call's state again (the next
beat is at most ``write_interval`` away: the rest is this shared machine's slack)."""


async def current_or_down(store: RedisStore, handle: str | None) -> bool:
    """Whether the record is current; False while the store fails (its first command after
    the restart finds its connection closed)."""
    try:
        return await current(store, handle)
    except StoreError:
        return False


@pytest.mark.parametrize("gap", [0.15, 1.0])
async def test_redis_back_empty_after_a_short_gap_holds_the_record_and_the_lease_again(
    redis_server: RedisServer, redis_store: RedisStore, gap: float
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec = await answered_call(emu, redis_store, StoreOptions())  # a deployment's defaults
        await stream_speech(a, 1, 10)
        await until(lambda: a.store_stats is not None and a.store_stats.writes > 0)

        # The user talks on while Redis is down (a real server process down for real: the
        # gap is wall-clock) and after it came back.
        talking = asyncio.create_task(stream_speech(a, 11, 100))
        await redis_server.kill()
        await asyncio.sleep(gap)
        await redis_server.start()  # back, empty
        loop = asyncio.get_running_loop()
        back_at = loop.time()
        async with asyncio.timeout(5):
            # Polling: Redis signals no write; the record is read at a beat's tenth.
            while not await current_or_down(redis_store, a.resumption_handle):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        current_after = loop.time() - back_at
        # The lease is the call's again: another process is refused.
        assert not await redis_store.acquire(KEY, "another process", 1.0)
        stats = a.store_stats
        assert stats is not None
        writes = stats.writes
        await talking
        await until(lambda: a.store_stats is not None and a.store_stats.writes > writes)
        assert a.is_connected
        await a.disconnect()

    assert current_after <= CURRENT_WITHIN, f"the record was current {current_after:.2f} s after"
    lost = [e for (e,) in rec.of("on_error") if isinstance(e.error, LeaseLostError)]
    assert lost == []  # no other process exists
    assert rec.of("on_close") == [(1000, "closed by the client")]
    assert await redis_store.load(KEY) is None  # the call ended: its record with it


async def said(worker: asyncio.subprocess.Process, until_line: str) -> list[str]:
    """The lines ``worker`` prints up to and including the first that starts with
    ``until_line`` (bounded: the worker imports google-genai first)."""
    assert worker.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(60):
        while not lines or not lines[-1].startswith(until_line):
            line = (await worker.stdout.readline()).decode()
            assert line, f"the worker ended after {lines[-3:]}"
            lines.append(line.strip())
    return lines


@pytest.mark.parametrize(
    "resume_while_open",
    [False, True],
    ids=["resume-refused-while-open", "on-a-kind-service-that-resumes-while-open"],
)
async def test_a_worker_stopped_past_its_lease_sends_nothing_once_it_learns_another_took_over(
    redis_server: RedisServer, redis_store: RedisStore, resume_while_open: bool
) -> None:
    # A service that resumes a session while its old connection is open lets the new driver
    # resume the stalled worker's session: both would feed it, interleaved.
    config = emulator_config("gemini", refuse_resume_while_open=not resume_while_open)
    async with Emulator(config) as emu:
        worker = await start_worker("told", emu, redis_server.url)
        try:
            await said(worker, "sent 20")
            worker.send_signal(signal.SIGSTOP)  # stalled: its lease runs out
            b = make_transport(emu, redis_store)  # waits for the lease to expire, then takes over
            rec_b = Recorder(b)
            await b.connect()
            await stream_speech(b, 5000, 10)
            loop = asyncio.get_running_loop()
            resumed_at = loop.time() - emu.started_at
            worker.send_signal(signal.SIGCONT)
            # The worker runs on while B's user talks: it learns at its first beat.
            told = await said(worker, "error")
            await stream_speech(b, 5010, 50)
            assert b.is_connected
            await b.disconnect()
        finally:
            worker.kill()
            await asyncio.wait_for(worker.wait(), 10)

    # What reached the service from the worker once it ran again: its audio carries seqs
    # 1..1000, B's from 5000.
    late = [
        seq
        for session in emu.ledger.sessions.values()
        for connection in session.connections
        for message in connection.client_messages
        if message.time >= resumed_at
        for seq in message.audio_seqs
        if seq < 5000
    ]
    # At most the chunk its talking loop sends while its overdue beat asks Redis (one round
    # trip): nothing after it learnt.
    assert len(late) <= 1, f"{len(late)} chunks reached the service from the stalled worker"
    assert told[-1] == "error LeaseLostError False"  # the call is lost to this worker
    (move,) = rec_b.moves
    assert move.reason is MoveReason.TAKEOVER
    assert rec_b.count("on_error") == 0


async def test_a_hand_over_asked_twice_at_once_hands_the_call_over_once(
    redis_store: RedisStore,
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec_a = await answered_call(emu, redis_store)
        await stream_speech(a, 1, 40)
        await asyncio.gather(a.hand_over(), a.hand_over())  # a drain and a deploy, say
        assert rec_a.of("on_close") == [(1000, "closed by the client")]
        rec_b = await take_over_and_talk(emu, redis_store, 1000)

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_duplicates == ()  # the next driver hears each chunk once
    assert summary.speech_lost == ()
    assert set(range(1, 41)) | set(range(1000, 1010)) <= set(summary.audio_consumed)


async def test_a_crash_is_taken_over_with_the_default_store_options(
    redis_store: RedisStore,
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a, _ = await answered_call(emu, redis_store, StoreOptions())
        await stream_speech(a, 1, 20)
        await crash(a)  # its lease lives on for its time to live
        # A re-dispatch, as the README has it.
        rec_b = await take_over_and_talk(emu, redis_store, 1000, StoreOptions())

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    assert set(range(1000, 1010)) <= set(
        emu.ledger.summary().sessions[session.session_id].audio_consumed
    )


async def test_a_second_live_driver_is_refused_with_the_default_wait(
    redis_store: RedisStore,
) -> None:
    options = StoreOptions(lease_ttl=1.0)  # the default wait, on a short lease: a short test
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, redis_store, options)
        await a.connect()
        b = make_transport(emu, redis_store, options)
        dialled = len(emu.ledger.attempts)
        with pytest.raises(LeaseHeldError, match="lease was renewed") as refused:
            await b.connect()
        assert len(emu.ledger.attempts) == dialled  # B never dialled
        assert not b.is_connected and a.is_connected
        await a.disconnect()
    assert KEY in str(refused.value)


def test_the_default_wait_for_a_held_lease_outlasts_the_lease_and_a_bad_one_is_refused() -> None:
    assert StoreOptions().wait_for_lease == 5.0 + 0.1
    assert StoreOptions(lease_ttl=1.0).wait_for_lease == 1.0 + 0.1
    assert StoreOptions(lease_wait=0.0).wait_for_lease == 0.0
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="lease_wait"):
            StoreOptions(lease_wait=bad)


async def test_a_record_copied_under_another_calls_key_is_refused_and_that_call_starts_fresh() -> (
    None
):
    store = MemoryStore()
    options = StoreOptions(encryption_key=Fernet.generate_key())  # one key for the deployment
    async with Emulator(emulator_config("gemini")) as emu:
        first = make_transport(
            emu, store, options, system_instruction="The caller's account is 4111-0042."
        )
        rec_first = Recorder(first)
        await first.connect()
        await answered_with_handle(first, rec_first, "my account number is 4111-0042")
        await until(lambda: first.store_stats is not None and first.store_stats.writes > 0)
        await crash(first)
        copied = await store.load(KEY)
        assert copied is not None
        await store.save("call-8", copied[0], 60)
        for part in copied[1:]:
            assert await store.append("call-8", part, 60)

        second, rec_second = await answered_call(emu, store, options, key="call-8")
        await second.disconnect()

    assert rec_second.moves == []  # not a takeover of the first caller's call
    ((event,),) = rec_second.of("on_error")
    assert isinstance(event.error, RecordError) and event.recoverable
    assert "another session key" in str(event.error)
    assert "4111" not in str(event.error)
    sessions = list(emu.ledger.sessions.values())
    assert len(sessions) == 2  # a server session of its own
    (connection,) = sessions[1].connections
    assert connection.setup is not None and "4111" not in connection.setup.system_instruction
    assert all("4111" not in text for c in connection.client_messages for _, text in c.turns)


async def test_a_record_nested_past_reason_is_reported_and_the_call_starts_fresh() -> None:
    store = MemoryStore()
    depth = 200_000
    body = b"[" * depth + b"]" * depth
    await store.save(
        KEY, b"RRS" + bytes((RECORD_VERSION, 0)) + len(body).to_bytes(4, "big") + body, 60
    )
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        rec = Recorder(a)
        await a.connect()
        ((event,),) = rec.of("on_error")
        assert isinstance(event.error, RecordError) and event.recoverable
        assert rec.moves == []
        await answered_with_handle(a, rec)
        # The next beat writes the call's own record over the bad one.
        await saved(store, lambda s: s.handle == a.resumption_handle)
        assert await current(store, a.resumption_handle)  # the bad record is gone
        await a.disconnect()


async def test_a_worker_stalled_while_another_took_its_call_and_handed_it_on_takes_it_no_more() -> (
    None
):
    clock = Clock()
    store = MemoryStore(clock)
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec = await answered_call(emu, store)
        await saved(store, lambda s: s.handle == a.resumption_handle)  # A's record holds it
        # A stalls past its lease; another process takes the call, writes its own record and
        # hands the call on (its lease given up, its record kept for the next process).
        clock.now += OPTIONS.lease_ttl + 1
        record = await store.load(KEY)
        assert record is not None and await store.acquire(KEY, "b", 60)
        theirs = RecordCodec(session_key=KEY, writer="b").encode(
            RecordCodec(session_key=KEY).decode(record)
        )
        assert await store.save(KEY, theirs, 60, lease="b")
        assert await store.release(KEY, "b")
        with pytest.raises(NotConnectedError):
            await stream_speech(a, 1, 40)  # A's next beat finds the lease free, the record not its
        await a.disconnect()
        assert await store.load(KEY) == [theirs]  # left for the next process
        assert await store.acquire(KEY, "c", 60)  # and so is the lease

    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, LeaseLostError) and not event.recoverable


async def test_a_takeover_holds_its_lease_while_its_dials_take_longer_than_the_lease(
    redis_store: RedisStore,
) -> None:
    """The process that took the call over keeps its lease from the claim, through dials
    slower than ``lease_ttl``: a stalled worker that wakes meanwhile finds the lease held and
    does not take the call back."""
    async with Emulator(emulator_config("gemini")) as emu:
        a, _ = await answered_call(emu, redis_store)
        await saved(redis_store, lambda stored: stored.handle is not None)
        await crash(a)
        emu.faults.hang_next(1)  # the takeover's first setup is never answered
        b = make_transport(emu, redis_store, setup_timeout=4 * OPTIONS.lease_ttl)
        connecting = asyncio.create_task(b.connect())
        await until(lambda: any(c.refused == "hang" for c in connections(emu)), timeout=10)
        loop = asyncio.get_running_loop()
        until_at = loop.time() + 2 * OPTIONS.lease_ttl  # the dial hangs all this time
        while loop.time() < until_at:
            assert not await redis_store.acquire(KEY, "a-stalled-worker", OPTIONS.lease_ttl)
            await asyncio.sleep(0.05)
        assert not connecting.done()
        await b.disconnect()
        with pytest.raises(DialAbandonedError):
            await connecting


def connections(emu: Emulator) -> list[ConnectionRecord]:
    return [c for r in emu.ledger.sessions.values() for c in r.connections]
