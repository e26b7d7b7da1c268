"""A call survives its worker: process A talks and dies mid-call; process B, with the same
session key, takes the call over from the store: the same server session (resumed, not
fresh), the user's speech kept but for at most one write interval, against the emulator over
real TLS and a real Redis server."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterable

import pytest
from cryptography.fernet import Fernet
from redis import asyncio as aioredis

from realtime_resumption.frames import SessionMovedFrame
from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import StoreOptions
from realtime_resumption.gemini.persistence import TAKEOVER_RETRY_DELAYS
from realtime_resumption.gemini.stored_session import RecordCodec, RecordError
from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason
from realtime_resumption.redis_store import RedisStore
from realtime_resumption.store import LeaseHeldError, LeaseLostError, MemoryStore, StoreError
from realtime_resumption.testing.emulator import Emulator, user_audio
from realtime_resumption.testing.redis_server import RedisServer
from realtime_resumption.transport import (
    ContentTurn,
    DialAbandonedError,
    GenerationEndReason,
    NotConnectedError,
    ToolCall,
    ToolResult,
    TransportError,
)

from ..livekit.lk_helpers import until
from ..transport.transport_helpers import (
    MODEL,
    Recorder,
    ScriptedServer,
    answered_with_handle,
    emulator_config,
)
from .conftest import Clock
from .takeover_helpers import (
    CHUNK,
    KEY,
    OPTIONS,
    answered_call,
    crash,
    make_transport,
    saved,
    start_worker,
    stored_speech,
    stream_speech,
    take_over_and_talk,
)


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_call_taken_over_after_a_crash_resumes_its_session_and_keeps_the_speech(
    redis_store: RedisStore, profile: str
) -> None:
    async with Emulator(emulator_config(profile)) as emu:
        a, _ = await answered_call(emu, redis_store)
        await stream_speech(a, 1, 60)
        stored = await redis_store.load(KEY)
        assert stored is not None and len(stored) > 2  # the record, and the speech appended
        await crash(a)
        # B starts while A's lease is still held: it waits (bounded) for it to expire, and
        # the user talks on meanwhile.
        b = make_transport(emu, redis_store)
        rec_b = Recorder(b)
        connecting = asyncio.create_task(b.connect())
        await asyncio.sleep(0.05)
        assert not connecting.done()
        await stream_speech(b, 61, 10)
        await connecting
        await stream_speech(b, 71, 10)
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
    consumed = summary.audio_consumed
    assert set(range(61, 81)) <= set(consumed)
    assert list(consumed) == sorted(consumed)  # the stored speech first, then what came after
    assert rec_b.count("on_error") == 0
    assert await redis_store.load(KEY) is None  # B's call ended: nothing left to take over


async def test_a_second_process_is_refused_while_the_first_drives_the_call() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        await a.connect()
        b = make_transport(emu, store, StoreOptions(lease_wait=0.0))
        dialled = len(emu.ledger.attempts)
        with pytest.raises(LeaseHeldError, match=KEY):
            await b.connect()
        assert len(emu.ledger.attempts) == dialled  # B never dialled
        assert not b.is_connected
        await a.disconnect()
        await b.connect()  # A's call ended: the key is free (a new call)
        await saved(store, lambda _: True)  # B's call saved
        await a.disconnect()  # again: A's call is over, B's record stays
        assert await store.load(KEY) is not None
        await b.disconnect()
        assert await store.load(KEY) is None


async def run_worker_until_killed(
    mode: str, emu: Emulator, redis_server: RedisServer, chunks: int
) -> list[int]:
    """A worker process (``tests/store/worker.py``) takes the call, says it sent ``chunks``
    chunks of speech, and is killed with SIGKILL at once. Returns their seqs."""
    worker = await start_worker(mode, emu, redis_server.url)
    assert worker.stdout is not None
    sent: list[int] = []
    try:
        async with asyncio.timeout(60):  # the worker imports google-genai and a framework first
            while len(sent) < chunks:
                line = (await worker.stdout.readline()).decode()
                assert line, "the worker ended"
                if line.startswith("sent "):
                    sent.append(int(line.split()[1]))
    finally:
        worker.send_signal(signal.SIGKILL)
        await asyncio.wait_for(worker.wait(), 10)
    assert worker.returncode == -signal.SIGKILL
    return sent


async def test_a_call_survives_its_worker_killed_with_sigkill(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        sent = await run_worker_until_killed("transport", emu, redis_server, 60)
        rec_b = await take_over_and_talk(emu, redis_store, 1000)

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    assert_kept_but_the_last_write_interval(emu, sent, range(1000, 1010))


async def test_a_pipecat_pipeline_killed_with_sigkill_is_taken_over_by_another(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    from pipecat.frames.frames import InputAudioRawFrame

    from ..pipecat.rig import Rig
    from .test_takeover_pipecat import bot

    async with Emulator(emulator_config("gemini")) as emu:
        sent = await run_worker_until_killed("pipecat", emu, redis_server, 60)
        async with Rig([bot(emu, redis_store)]) as rig:
            await rig.context()
            for seq in range(1000, 1010):
                audio = user_audio(seq, speech=True)
                await rig.queue(InputAudioRawFrame(audio=audio, sample_rate=16_000, num_channels=1))
                await asyncio.sleep(CHUNK)
            await asyncio.sleep(0.1)
        (moved,) = rig.of(SessionMovedFrame)

    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    assert_kept_but_the_last_write_interval(emu, sent, range(1000, 1010))


def assert_kept_but_the_last_write_interval(
    emu: Emulator, sent: list[int], new: Iterable[int]
) -> None:
    """One server session, resumed once; of the speech the killed worker said it sent (maybe
    a few chunks more were sent before it died), at most one write interval is lost; what the
    new process sent is kept."""
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.connections == 2
    assert len(summary.speech_lost) * CHUNK <= OPTIONS.write_interval + 2 * CHUNK
    missing = set(sent) - set(summary.audio_consumed)
    assert len(missing) * CHUNK <= OPTIONS.write_interval + CHUNK
    assert set(new) <= set(summary.audio_consumed)


async def test_an_expired_handle_rebuilds_the_call_from_the_stored_conversation() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        rec_a = Recorder(a)
        await a.connect()
        a.send_content([ContentTurn("user", "my name is Ada")])
        await rec_a.wait_for("on_turn_complete")
        await rec_a.wait(lambda r: r.of("on_resumption_update")[-1][1])
        await saved(store, lambda s: s.handle == a.resumption_handle)
        await crash(a)
        emu.faults.expire_handles()
        b = make_transport(emu, store)
        rec_b = Recorder(b)
        await b.connect()
        b.send_content([ContentTurn("user", "what is my name?")])
        await rec_b.wait_for("on_turn_complete")
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome, move.handle_kind, move.attempts) == (
        MoveReason.TAKEOVER,
        MoveOutcome.REBUILT,
        HandleKind.AFTER_TURN,  # the handle it tried
        2,
    )
    assert move.error is not None and "1007" in move.error
    _, fresh = emu.ledger.sessions.values()
    seeded = [m for m in fresh.connections[0].client_messages if m.kind == "client_content"]
    assert not seeded[0].turn_complete
    assert seeded[0].turns[0][1] == "my name is Ada"
    assert [t.outcome for t in emu.ledger.summary().sessions[fresh.session_id].turns] == [
        "complete"
    ]


async def test_a_tool_call_open_at_the_crash_is_asked_again_and_answered_once() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec_a = await answered_call(emu, store, tools=[{"name": "lookup"}])
        a.send_content([ContentTurn("user", "please lookup flights")])
        await rec_a.wait_for("on_tool_call")
        # The stored handle came before the question: the record holds it as input.
        await saved(store, lambda s: [m.kind for m in s.input] == ["content"])
        await crash(a)  # before the tool ran
        b = make_transport(emu, store, tools=[{"name": "lookup"}])
        rec_b = Recorder(b)
        await b.connect()
        await rec_b.wait_for("on_tool_call")
        ((calls,),) = rec_b.of("on_tool_call")
        (call,) = calls
        b.send_tool_result(ToolResult(call.id, call.name, {"flights": 2}))
        await rec_b.wait_for("on_turn_complete")
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    assert session.stranded_tool_responses == []
    assert session.unawaited_tool_responses == []
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.turns[-1].outcome == "complete"
    assert rec_b.count("on_error") == 0


async def test_the_call_goes_on_while_redis_is_down_and_is_saved_again_when_it_returns(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec = await answered_call(emu, redis_store)
        await redis_server.stop()
        await stream_speech(a, 1, 50)  # one second of the user talking, Redis down
        await answered_with_handle(a, rec, "still there?")  # a new handle the store lacks
        assert a.is_connected
        stats = a.store_stats
        assert stats is not None and stats.errors >= 2
        errors = [e for (e,) in rec.of("on_error")]
        assert len(errors) == 1  # once per outage, not once per beat
        assert isinstance(errors[0].error, StoreError) and errors[0].recoverable
        await redis_server.start()  # back, empty
        await saved(redis_store, lambda _: True)  # the next beat saves
        record = await redis_store.load(KEY)
        assert record is not None
        assert RecordCodec(session_key=KEY).decode(record).handle == a.resumption_handle
        await a.disconnect()
    assert rec.count("on_close") == 1


async def test_what_redis_holds_is_encrypted_and_another_key_starts_fresh_reported(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    key = Fernet.generate_key()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, redis_store, StoreOptions(lease_ttl=1.0, encryption_key=key))
        rec_a = Recorder(a)
        await a.connect()
        a.send_content([ContentTurn("user", "my secret words")])
        await rec_a.wait_for("on_turn_complete")
        await rec_a.wait(lambda r: r.of("on_resumption_update")[-1][1])
        handle = a.resumption_handle
        assert handle is not None
        raw = aioredis.Redis.from_url(redis_server.url)
        try:
            stored: list[bytes] = []
            for _ in range(100):  # the next beat saves the newest handle: bounded poll
                stored = await raw.lrange(redis_store.record_key(KEY), 0, -1)
                if stored and RecordCodec(key, session_key=KEY).decode(stored).handle == handle:
                    break
                await asyncio.sleep(0.02)
        finally:
            await raw.aclose()
        assert stored and RecordCodec(key, session_key=KEY).decode(stored).handle == handle
        for part in stored:
            assert handle.encode() not in part and b"secret words" not in part
        await crash(a)
        b = make_transport(
            emu,
            redis_store,
            StoreOptions(lease_ttl=1.0, lease_wait=3.0, encryption_key=Fernet.generate_key()),
        )
        rec_b = Recorder(b)
        await b.connect()
        await b.disconnect()
    assert rec_b.moves == []  # a fresh call, not a takeover
    ((error,),) = rec_b.of("on_error")
    assert isinstance(error.error, RecordError) and "cannot be decrypted" in str(error.error)
    assert len(emu.ledger.sessions) == 2


async def test_a_resume_refused_while_the_hung_worker_holds_the_session_open_is_rebuilt() -> None:
    store = MemoryStore()
    # The service as measured (the emulator's default) refuses (1011) a resume while the
    # session has an open connection: a hung worker's stays open.
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        rec_a = Recorder(a)
        await a.connect()
        a.send_content([ContentTurn("user", "my name is Ada")])
        await rec_a.wait_for("on_turn_complete")
        await rec_a.wait(lambda r: r.of("on_resumption_update")[-1][1])
        await saved(store, lambda s: s.handle == a.resumption_handle)
        await crash(a, hung=True)
        b = make_transport(emu, store)
        rec_b = Recorder(b)
        await b.connect()
        b.send_content([ContentTurn("user", "what is my name?")])
        await rec_b.wait_for("on_turn_complete")
        await b.disconnect()

    (move,) = rec_b.moves
    # Retried once a little later; a second 1011 with the same handle is a refusal (the
    # project's one failure policy, gemini.failures): rebuilt on the third dial.
    assert (move.reason, move.outcome, move.attempts) == (
        MoveReason.TAKEOVER,
        MoveOutcome.REBUILT,
        3,
    )
    assert len(TAKEOVER_RETRY_DELAYS) >= 2
    refusals = [c.refused for c in next(iter(emu.ledger.sessions.values())).connections]
    assert refusals[1:] == ["open-session", "open-session"]
    fresh = list(emu.ledger.sessions.values())[-1]
    seeded = [m for m in fresh.connections[0].client_messages if m.kind == "client_content"]
    assert seeded[0].turns[0][1] == "my name is Ada"


async def test_a_tool_call_the_stored_handle_knows_is_answered_on_the_session_that_issued_it(
    scripted: ScriptedServer,
) -> None:
    # The emulator, like the service as measured, issues no handle while a tool call is open;
    # a bare scripted endpoint does, to reach the case where the stored session knows the call.
    store = MemoryStore()

    def transport() -> GeminiLiveTransport:
        return GeminiLiveTransport(
            api_key="k",
            model=MODEL,
            http_options=scripted.http_options(),
            tools=[{"name": "lookup"}],
            store=store,
            session_key=KEY,
            store_options=OPTIONS,
        )

    a = transport()
    rec_a = Recorder(a)
    await a.connect()
    a.send_content([ContentTurn("user", "please lookup flights")])
    async with asyncio.timeout(5):  # the session has the question before its handle comes
        while not scripted.received:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    call = {"id": "fc-1", "name": "lookup", "args": {"to": "Oslo"}}
    await scripted.send({"toolCall": {"functionCalls": [call]}})
    await rec_a.wait_for("on_tool_call")
    await scripted.send(
        {"sessionResumptionUpdate": {"newHandle": "h-with-call", "resumable": True}}
    )
    await rec_a.wait_for("on_resumption_update")
    # A's record holds the handle and the call it knows.
    await saved(
        store, lambda s: s.handle == "h-with-call" and [c.id for c in s.tool_calls] == ["fc-1"]
    )
    await crash(a)
    b = transport()
    rec_b = Recorder(b)
    await b.connect()
    ((calls,),) = rec_b.of("on_tool_call")
    assert calls == (ToolCall("fc-1", "lookup", {"to": "Oslo"}),)
    b.send_tool_result(ToolResult("fc-1", "lookup", {"flights": 2}))
    async with asyncio.timeout(5):
        while not any("tool_response" in m for m in scripted.received):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    assert scripted.setups[-1]["setup"]["sessionResumption"]["handle"] == "h-with-call"
    (response,) = [m["tool_response"] for m in scripted.received if "tool_response" in m]
    assert response["functionResponses"][0]["id"] == "fc-1"
    # B's session never got the question again: the session it resumed has it.
    assert [m for m in scripted.received if "client_content" in m] == scripted.received[:1]
    assert rec_b.names("on_move", "on_tool_call") == ["on_move", "on_tool_call"]

    # B dies before the session issues a handle: C resumes the stored handle again, and the
    # result B sent, which that session lacks, goes to it again (the call is not asked again).
    await saved(store, lambda s: any(m.kind == "tool_response" for m in s.input))
    await crash(b)
    c = transport()
    rec_c = Recorder(c)
    await c.connect()
    async with asyncio.timeout(5):
        while sum("tool_response" in m for m in scripted.received) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    await c.disconnect()

    (move,) = rec_c.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    assert scripted.setups[-1]["setup"]["sessionResumption"]["handle"] == "h-with-call"
    responses = [m["tool_response"] for m in scripted.received if "tool_response" in m]
    assert [r["functionResponses"][0]["id"] for r in responses] == ["fc-1", "fc-1"]
    assert rec_c.count("on_tool_call") == 0


async def test_no_handle_is_whole_in_the_logs_reports_or_errors_of_a_takeover() -> None:
    from ..transport.test_secrets import Capture

    store = MemoryStore()
    with Capture() as capture:
        async with Emulator(emulator_config("gemini")) as emu:
            a = make_transport(emu, store)
            rec_a = Recorder(a)
            await a.connect()
            a.send_content([ContentTurn("user", "my name is Ada")])
            await rec_a.wait_for("on_turn_complete")
            await rec_a.wait(lambda r: r.of("on_resumption_update")[-1][1])
            await saved(store, lambda s: s.handle == a.resumption_handle)
            await crash(a)
            emu.faults.expire_handles()  # refused: the error path names the failure
            b = make_transport(emu, store)
            rec_b = Recorder(b)
            await b.connect()
            await b.disconnect()
    handles = {h for h, *_ in rec_a.of("on_resumption_update") + rec_b.of("on_resumption_update")}
    handles.discard(None)
    assert handles
    assert any("took the call 'call-7' over (rebuilt" in t for t in capture.texts)
    assert capture.leaks(handles) == []
    texts = [repr(m) for m in rec_b.moves] + [str(e.error) for (e,) in rec_b.of("on_error")]
    texts += [repr(b), repr(store), repr(b._persister)]
    assert not [t for t in texts for h in handles if h in t]


async def test_a_worker_that_lost_its_lease_ends_its_session_and_leaves_the_record_be() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec = await answered_call(emu, store)
        # A stalls past its lease (the store's clock jumps) and another process takes it.
        clock.now += OPTIONS.lease_ttl + 1
        assert await store.acquire(KEY, "another process", 60)
        with pytest.raises(NotConnectedError):
            await stream_speech(a, 1, 40)  # A's next beat finds the lease gone
        assert not a.is_connected  # it stopped driving the call
        stored = await store.load(KEY)
        await a.disconnect()
        assert await store.load(KEY) == stored  # the new owner's now: not deleted
        assert not await store.acquire(KEY, "a third process", 60)  # nor its lease released

    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, LeaseLostError) and not event.recoverable
    assert rec.of("on_close") == [(1000, "another process took the call over")]
    (session,) = emu.ledger.sessions.values()
    (connection,) = session.connections
    assert connection.closed_by == "client"  # closed at once, not left to a timeout


async def test_a_store_down_at_connect_starts_the_call_and_saves_it_once_back(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    await redis_server.stop()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, redis_store)
        rec = Recorder(a)
        await a.connect()  # within the store's bound, without its state
        assert a.is_connected and rec.moves == []
        ((event,),) = rec.of("on_error")
        assert isinstance(event.error, StoreError) and "redis acquire" in str(event.error)
        await redis_server.start()
        await saved(redis_store, lambda _: True)  # the next beats take the lease and save
        assert await redis_store.load(KEY) is not None
        await a.disconnect()
    assert await redis_store.load(KEY) is None


class SlowLoad(MemoryStore):
    """The in-memory store whose ``load`` waits until ``go`` is set: a slow store, on cue."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.go = asyncio.Event()
        self.go.set()

    async def load(self, key: str) -> list[bytes] | None:
        await self.go.wait()
        return await super().load(key)


@pytest.mark.parametrize("stage", ["waiting for the lease", "loading the record"])
async def test_a_disconnect_while_connect_asks_the_store_keeps_the_stored_call(
    stage: str,
) -> None:
    clock = Clock()
    store = SlowLoad(clock)
    async with Emulator(emulator_config("gemini")) as emu:
        a, _ = await answered_call(emu, store)
        await saved(store, lambda s: s.handle == a.resumption_handle)
        await crash(a)  # its lease is held for lease_ttl yet
        if stage == "loading the record":
            clock.now += OPTIONS.lease_ttl  # A's lease expired: B takes it, then loads
            store.go.clear()
        b = make_transport(emu, store)
        connecting = asyncio.create_task(b.connect())
        await asyncio.sleep(0.1)
        assert not connecting.done()
        b.send_audio(user_audio(1))  # taken while it waits, as during a dial
        await b.disconnect()
        store.go.set()
        with pytest.raises(DialAbandonedError):
            await connecting
        assert not b.is_connected
        assert await store.load(KEY) is not None  # the call is still there to take over
        clock.now += OPTIONS.lease_ttl + 1  # whatever lease was left expires
        c = make_transport(emu, store)
        rec_c = Recorder(c)
        await c.connect()
        await c.disconnect()
    assert [m.outcome for m in rec_c.moves] == [MoveOutcome.RESUMED]


class Broken(MemoryStore):
    """A custom store with a bug: its saves raise something else than ``StoreError``."""

    async def save(
        self,
        key: str,
        record: bytes,
        ttl: float,
        *,
        lease: str | None = None,
        lease_ttl: float | None = None,
    ) -> bool:
        raise RuntimeError("a bug in a custom store")


async def test_a_store_that_raises_anything_never_ends_the_call_nor_its_saver() -> None:
    store = Broken()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        rec = Recorder(a)
        await a.connect()
        await rec.wait_for("on_error")
        await stream_speech(a, 1, 30)
        a.send_content([ContentTurn("user", "still there?")])
        await rec.wait_for("on_turn_complete")
        stats = a.store_stats
        assert stats is not None and stats.errors >= 2  # it kept trying, beat after beat
        await a.disconnect()
    ((event,),) = rec.of("on_error")
    assert isinstance(event.error, StoreError) and "RuntimeError" in str(event.error)
    assert rec.count("on_close") == 1


async def test_a_livekit_agent_session_killed_with_sigkill_is_taken_over_by_another(
    redis_server: RedisServer, redis_store: RedisStore
) -> None:
    from livekit.agents import Agent

    from ..livekit.lk_helpers import voice_call

    model = {"store": redis_store, "session_key": KEY, "store_options": OPTIONS}
    async with Emulator(emulator_config("gemini")) as emu:
        sent = await run_worker_until_killed("livekit", emu, redis_server, 60)
        async with voice_call(emu, Agent(instructions="Be brief."), pace=1.0, **model) as b:
            b.mic._seq = 100_000  # B's chunks apart from A's (each microphone counts from 0)
            b.mic.say(["what", "did", "I", "say"], speech_chunks=10)
            await until(lambda: len(b.mic.spoken) >= 10 and len(b.recorder.moves) == 1)
            await asyncio.sleep(0.1)
            moves = list(b.recorder.moves)
            new = list(b.mic.spoken)

    (moved,) = moves
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    assert min(new) >= 100_000
    assert_kept_but_the_last_write_interval(emu, sent, new)


async def test_a_call_handed_over_mid_speech_loses_nothing_it_accepted(
    redis_store: RedisStore,
) -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        a, rec_a = await answered_call(emu, redis_store)
        accepted: list[int] = []

        async def talk() -> None:
            for seq in range(1, 500):
                try:
                    a.send_audio(user_audio(seq, speech=True))
                except NotConnectedError:
                    return  # the call is another process's now: the app is told
                accepted.append(seq)
                await asyncio.sleep(CHUNK)

        talking = asyncio.create_task(talk())
        await asyncio.sleep(40 * CHUNK)
        await a.hand_over()
        async with asyncio.timeout(5):
            await talking
        assert rec_a.of("on_close") == [(1000, "closed by the client")]
        # At once: the lease was given up.
        rec_b = await take_over_and_talk(emu, redis_store, 1000)

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert len(accepted) >= 30
    assert summary.speech_lost == ()
    assert set(accepted) | set(range(1000, 1010)) <= set(summary.audio_consumed)


async def test_a_hand_over_waits_for_the_answer_in_progress() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config("gemini", answer_chunks=40)) as emu:
        a = make_transport(emu, store)
        rec_a = Recorder(a)
        await a.connect()
        # The story is the session's first answer: no handle until it ends (the service as
        # measured), so the hand-over must wait for the handle that follows it too.
        a.send_content([ContentTurn("user", "tell me a story")])
        await rec_a.wait_for("on_audio_output")
        await a.hand_over()
        assert rec_a.ends() == [GenerationEndReason.GENERATION_COMPLETE]  # not cut
        b = make_transport(emu, store)
        rec_b = Recorder(b)
        await b.connect()
        b.send_content([ContentTurn("user", "and then?")])
        await rec_b.wait_for("on_turn_complete")
        await b.disconnect()

    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    turns = emu.ledger.summary().sessions[session.session_id].turns
    assert [t.outcome for t in turns] == ["complete", "complete"]  # the story not told twice
    with pytest.raises(TransportError, match="needs a store"):
        await GeminiLiveTransport(api_key="k").hand_over()


async def test_what_the_framework_sends_when_it_hears_of_the_takeover_is_kept() -> None:
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        a, _ = await answered_call(emu, store)
        await stream_speech(a, 1, 10)
        await saved(store, lambda s: s.handle == a.resumption_handle)
        await crash(a)
        b = make_transport(emu, store)
        rec_b = Recorder(b)
        heard: list[MoveReason] = []

        def started(reason: MoveReason, kind: HandleKind) -> None:
            # A framework answering the start of the move (a frame, a greeting) sends at once.
            heard.append(reason)
            b.send_audio(user_audio(500, speech=True))

        b.on_move_started = started
        await b.connect()
        await stream_speech(b, 501, 5)
        await asyncio.sleep(0.1)
        await b.disconnect()

    assert heard == [MoveReason.TAKEOVER]
    (move,) = rec_b.moves
    assert (move.reason, move.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    (session,) = emu.ledger.sessions.values()
    consumed = emu.ledger.summary().sessions[session.session_id].audio_consumed
    assert {500, *range(501, 506)} <= set(consumed)


async def test_a_call_taken_over_twice_before_its_session_issues_a_handle_resumes_twice() -> None:
    # The service as measured (the emulator's default): no handle after a setup, none during
    # a turn, none while a tool call is open. B resumes A's session and dies before the
    # session issues one: the handle B resumed from is still the session's, and C resumes
    # from it too, with what B's session heard replayed again.
    store = MemoryStore()
    tools = [{"name": "lookup"}]
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store, tools=tools)
        rec_a = Recorder(a)
        await a.connect()
        a.send_content([ContentTurn("user", "hello")])
        await rec_a.wait_for("on_resumption_update")  # after the answer
        await saved(store, lambda s: s.handle == a.resumption_handle)
        await stream_speech(a, 1, 30, words=["please", "lookup"])
        await crash(a)  # mid-question
        b = make_transport(emu, store, tools=tools)
        rec_b = Recorder(b)
        await b.connect()
        sent: list[int] = []
        await stream_speech(b, 100, 10, words=["flights"], sent=sent)
        silence = asyncio.create_task(stream_speech(b, 110, 200, speech=False, sent=sent))
        try:
            await rec_b.wait_for("on_tool_call")
        finally:
            silence.cancel()
            await asyncio.gather(silence, return_exceptions=True)
        # B's record holds all its user sent: the words and the silence that ended the turn
        # (C's replay of a record that stopped short of it would never end the question).
        await saved(store, lambda s: set(sent) <= stored_speech(s))
        # The session issued no handle since B resumed it: the record keeps the stored one.
        assert not any(resumable for _, resumable, _ in rec_b.of("on_resumption_update"))
        record = await store.load(KEY)
        assert record is not None
        stored = RecordCodec(session_key=KEY).decode(record)
        assert stored.handle is not None and stored.handle == b.resumption_handle
        assert stored.handle_kind is HandleKind.AFTER_TURN
        await crash(b)  # while the tool runs
        c = make_transport(emu, store, tools=tools)
        rec_c = Recorder(c)
        await c.connect()
        await rec_c.wait_for("on_tool_call")  # the question, heard again, asks again
        ((calls,),) = rec_c.of("on_tool_call")
        (call,) = calls
        c.send_tool_result(ToolResult(call.id, call.name, {"flights": 2}))
        await rec_c.wait_for("on_turn_complete")
        await c.disconnect()

    ((b_move,), (c_move,)) = rec_b.moves, rec_c.moves
    for move in (b_move, c_move):
        assert (move.reason, move.outcome, move.handle_kind) == (
            MoveReason.TAKEOVER,
            MoveOutcome.RESUMED,
            HandleKind.AFTER_TURN,
        )
    assert c_move.error is None
    (session,) = emu.ledger.sessions.values()  # resumed twice: no second server session
    assert session.stranded_tool_responses == []
    assert session.unawaited_tool_responses == []
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.connections == 3
    assert summary.turns[-1].outcome == "complete"
    # B's words reached C's session once each; what is lost is A's last beat at most.
    consumed = summary.audio_consumed
    assert set(range(100, 110)) <= set(consumed)
    assert summary.speech_duplicates == ()
    assert all(seq > 30 - (OPTIONS.write_interval / CHUNK) - 1 for seq in summary.speech_lost)
    assert rec_c.count("on_error") == 0


async def test_a_call_taken_over_moves_from_the_handle_it_resumed_from_until_a_new_one() -> None:
    # No handle after a setup (the service as measured): a move before the session issues one
    # resumes from the stored handle, with the input replayed again, as after any move.
    store = MemoryStore()
    async with Emulator(emulator_config("gemini")) as emu:
        a = make_transport(emu, store)
        rec_a = Recorder(a)
        await a.connect()
        a.send_content([ContentTurn("user", "hello")])
        await rec_a.wait_for("on_resumption_update")
        await saved(store, lambda s: s.handle == a.resumption_handle)
        await crash(a)
        b = make_transport(emu, store)
        rec_b = Recorder(b)
        await b.connect()
        stored = b.resumption_handle
        assert stored is not None  # the handle B resumed from, before the session issued one
        await stream_speech(b, 1, 10)
        await b.reconnect()
        await stream_speech(b, 11, 5)
        await asyncio.sleep(0.1)
        assert not any(resumable for _, resumable, _ in rec_b.of("on_resumption_update"))
        await b.disconnect()

    takeover, moved = rec_b.moves
    assert (takeover.reason, takeover.outcome) == (MoveReason.TAKEOVER, MoveOutcome.RESUMED)
    assert (moved.reason, moved.outcome) == (MoveReason.REQUESTED, MoveOutcome.RESUMED)
    assert moved.messages_replayed >= 10  # the speech since the takeover: the handle lacks it
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert set(range(1, 16)) <= set(summary.audio_consumed)
    assert summary.speech_duplicates == ()
