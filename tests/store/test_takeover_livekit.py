"""A LiveKit agent's call survives its worker: the AgentSession of worker A hears the user and
dies mid-call; the AgentSession of worker B, whose model has the same store and key, takes
the call over on the same server session. Real AgentSessions on the emulator (no room: the
key is given, as outside a job)."""

from __future__ import annotations

import pytest
from livekit.agents import Agent

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.store import LeaseLostError, MemoryStore
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..livekit.lk_helpers import until, voice_call
from .conftest import Clock
from .takeover_helpers import KEY, OPTIONS, crash, saved

SCALE = 0.25


async def test_a_livekit_call_taken_over_continues_its_session() -> None:
    store = MemoryStore()
    model = {"store": store, "session_key": KEY, "store_options": OPTIONS}
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        async with voice_call(emu, Agent(instructions="Be brief."), pace=SCALE, **model) as a:
            a.mic.say(["my", "name", "is", "Ada"])
            await a.settled(messages=2)
            await saved(store, lambda s: s.handle is not None)  # the handle after the answer
            await crash(a.agent.realtime_llm_session._transport)
        async with voice_call(emu, Agent(instructions="Be brief."), pace=SCALE, **model) as b:
            b.mic.say(["what", "is", "my", "name"])
            await b.settled(messages=2)
            await until(lambda: len(b.recorder.moves) == 1)
            moves = list(b.recorder.moves)
            errors = list(b.recorder.errors)

    (moved,) = moves
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    assert errors == []
    (session,) = emu.ledger.sessions.values()  # the same server session, resumed
    summary = emu.ledger.summary().sessions[session.session_id]
    assert [t.outcome for t in summary.turns] == ["complete", "complete"]


async def test_outside_a_job_a_store_needs_a_key() -> None:
    from livekit.plugins import realtime_resumption as rr

    model = rr.RealtimeModel(api_key="k", store=MemoryStore())
    with pytest.raises(ValueError, match="needs a session_key outside a LiveKit job"):
        model.session()


async def test_a_livekit_call_handed_over_at_a_drain_continues_in_the_next_worker() -> None:
    store = MemoryStore()
    model = {"store": store, "session_key": KEY, "store_options": OPTIONS}
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        async with voice_call(emu, Agent(instructions="Be brief."), pace=SCALE, **model) as a:
            a.mic.say(["my", "name", "is", "Ada"])
            await a.settled(messages=2)
            await a.agent.realtime_llm_session.hand_over()
            errors_a = list(a.recorder.errors)
        async with voice_call(emu, Agent(instructions="Be brief."), pace=SCALE, **model) as b:
            b.mic.say(["what", "is", "my", "name"])
            await b.settled(messages=2)
            await until(lambda: len(b.recorder.moves) == 1)
            moves = list(b.recorder.moves)

    (moved,) = moves
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    assert errors_a == []
    (session,) = emu.ledger.sessions.values()
    summary = emu.ledger.summary().sessions[session.session_id]
    assert [t.outcome for t in summary.turns] == ["complete", "complete"]


async def test_a_livekit_session_whose_call_another_process_took_gets_an_error_event() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    model = {"store": store, "session_key": KEY, "store_options": OPTIONS}
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        async with voice_call(emu, Agent(instructions="Be brief."), pace=SCALE, **model) as a:
            a.mic.say(["my", "name", "is", "Ada"])
            await a.settled(messages=2)
            # The worker stalls past its lease (the store's clock jumps) and another process
            # takes the call; the worker's next beat finds it out.
            clock.now += OPTIONS.lease_ttl + 1
            assert await store.acquire(KEY, "another process", 60)
            await until(lambda: a.recorder.fatal_errors != [])
            fatal = a.recorder.fatal_errors

    (event,) = fatal
    assert isinstance(event.error, LeaseLostError)
    (session,) = emu.ledger.sessions.values()
    (connection,) = session.connections
    assert connection.closed_by == "client"  # closed at once, the call still going on here
