"""A LiveKit job's call survives its worker's drain: when the worker shuts its job down (a drain
that ran out of time, a deploy), the job closes its AgentSession and then runs its shutdown
callbacks with the reason ``parent process shutdown``; the RealtimeSession, whose model has a
store, hands the call over instead of ending it, and the worker the room goes to next takes it
over on the same server session with nothing the user said lost. Any other shutdown reason
(the room closed, the app shut the job down) ends the call: its state is deleted.

Real AgentSessions on the emulator, each in a real ``JobContext`` of a fake job (LiveKit's own
mock room, as ``simulate_job(fake_job=True)`` makes it: there is no LiveKit server here). What
is simulated is the job process's shutdown sequence (``_JobProc._shutdown_job`` in
``livekit/agents/ipc/job_proc_lazy_main.py``): it needs the worker's IPC channel, so the test
runs its steps itself, in its order: the primary AgentSession's ``aclose()``, then every
shutdown callback with the reason."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from livekit.agents import Agent, JobContext
from livekit.agents.ipc.mock_room import create_mock_room
from livekit.agents.job import (
    JobAcceptArguments,
    JobExecutorType,
    JobProcess,
    RunningJobInfo,
    _JobContextVar,
)
from livekit.protocol import agent, models

from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.store import MemoryStore
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..livekit.lk_helpers import VoiceCall, make_model, until, voice_call
from .takeover_helpers import OPTIONS, saved

SCALE = 0.25
ROOM = "console"
"""The name of LiveKit's mock room: the calls' key in the store (a room's name by default)."""
WORKER_SHUTDOWN = "parent process shutdown"
"""What the job's shutdown says when its worker sent the ShutdownRequest (no reason given)."""


@contextlib.contextmanager
def in_job() -> Iterator[JobContext]:
    """Code run meanwhile runs in a fake job, as a job process runs its entrypoint
    (``get_job_context()`` answers); its room is LiveKit's mock room, named ``ROOM``."""
    ctx = JobContext(
        proc=JobProcess(
            executor_type=JobExecutorType.PROCESS, user_arguments=None, http_proxy=None
        ),
        info=RunningJobInfo(
            accept_arguments=JobAcceptArguments(identity="agent", name="", metadata=""),
            job=agent.Job(
                id="mock-job-1", room=models.Room(sid="RM_1", name=ROOM), type=agent.JobType.JT_ROOM
            ),
            url="ws://localhost:7880",
            token="",
            worker_id="worker-1",
            fake_job=True,
        ),
        room=create_mock_room(),
        on_connect=lambda: None,
        on_shutdown=lambda _: None,
        inference_executor=None,  # type: ignore[arg-type]  # no inference here
    )
    token = _JobContextVar.set(ctx)
    try:
        yield ctx
    finally:
        _JobContextVar.reset(token)


async def shut_down(ctx: JobContext, reason: str) -> None:
    """The job's shutdown, in LiveKit's order: the primary AgentSession closed, then the
    shutdown callbacks, all at once, with the reason."""
    await ctx.primary_session.aclose()
    await asyncio.gather(*(callback(reason) for callback in ctx._shutdown_callbacks))


@contextlib.asynccontextmanager
async def job_call(
    emu: Emulator, store: MemoryStore
) -> AsyncIterator[tuple[JobContext, VoiceCall]]:
    """A voice call in a job; the model keeps it in ``store`` under the room's name."""
    model: dict[str, Any] = {"store": store, "store_options": OPTIONS}
    with in_job() as ctx:
        async with voice_call(emu, Agent(instructions="Be brief."), pace=SCALE, **model) as call:
            yield ctx, call


async def test_a_call_handed_over_at_the_worker_drain_goes_on_in_the_next_worker() -> None:
    store = MemoryStore()
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        async with job_call(emu, store) as (ctx, a):
            a.mic.say(["my", "name", "is", "Ada"])
            await a.settled(messages=2)
            a.mic.say(["and", "I", "live", "in", "Paris"], speech_chunks=40)
            await until(lambda: len(a.mic.spoken) >= 20)  # mid-sentence
            await shut_down(ctx, WORKER_SHUTDOWN)
            errors_a = list(a.recorder.errors)
            spoken_a = list(a.mic.spoken)
        assert await store.load(ROOM) is not None  # kept for the next worker
        async with job_call(emu, store) as (_, b):
            b.mic._seq = 100_000  # B's chunks apart from A's (each microphone counts from 0)
            b.mic.say(["what", "is", "my", "name"])
            await until(lambda: len(b.recorder.moves) == 1)
            await b.settled(messages=2)
            moves = list(b.recorder.moves)

    (moved,) = moves
    assert (moved.report.reason, moved.report.outcome) == (
        MoveReason.TAKEOVER,
        MoveOutcome.RESUMED,
    )
    assert errors_a == []
    (session,) = emu.ledger.sessions.values()  # the same server session, resumed
    summary = emu.ledger.summary().sessions[session.session_id]
    assert summary.speech_lost == ()
    assert set(spoken_a) <= set(summary.audio_consumed)  # all A heard, the server has
    outcomes = [t.outcome for t in summary.turns]
    # Every answer whole (none cut by the hand-over), B's question answered too.
    assert len(outcomes) >= 2 and set(outcomes) == {"complete"}


async def test_a_job_shut_down_for_another_reason_ends_the_call() -> None:
    store = MemoryStore()
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        async with job_call(emu, store) as (ctx, a):
            a.mic.say(["my", "name", "is", "Ada"])
            await a.settled(messages=2)
            await saved(store, lambda _: True, key=ROOM)
            assert await store.load(ROOM) is not None  # saved while the call runs
            await shut_down(ctx, "room disconnected")
        assert await store.load(ROOM) is None  # the call is over: nothing to take over
        assert await store.acquire(ROOM, "another worker", 1.0)  # and its lease is free


async def test_an_agent_handing_off_to_another_is_no_hand_over() -> None:
    """An agent handoff that closes the RealtimeSession (the next agent has a model of its
    own, with the same store) while the AgentSession goes on is not the job's shutdown:
    nothing is handed over, the next agent's session is its own."""
    store = MemoryStore()
    async with Emulator(EmulatorConfig(time_scale=SCALE)) as emu:
        async with job_call(emu, store) as (ctx, a):
            a.mic.say(["my", "name", "is", "Ada"])
            await a.settled(messages=2)
            first = a.agent.realtime_llm_session
            model = make_model("ours", emu, store=store, store_options=OPTIONS)
            nxt = Agent(instructions="Be terse.", llm=model)
            a.session.update_agent(nxt)
            await until(lambda: nxt._activity is not None and nxt._activity.realtime_llm_session)
            second = nxt.realtime_llm_session
            assert second is not first
            await until(lambda: second._transport.is_connected)
            assert not second._transport.taken_over
            await shut_down(ctx, "room disconnected")

    assert len(emu.ledger.sessions) == 2  # the next agent's session is its own
