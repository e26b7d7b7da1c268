"""Random interleavings of user input, model output, tool calls, goAways and drops against the
emulator keep every rotation invariant (see conftest's ``check_invariants``).

Each example is a short script run on a fresh emulator, transport and caller: utterances
(questions and tool requests, waited for or not), typed text, goAways and drops now or at a
chosen answer chunk or tool call, a refused attempt, expired handles, and pauses until the
conversation is quiet. It ends with a further user turn that must be answered.

Each example also draws the server it runs on: whether it refuses a resume while the old
connection is open (the service as measured, mostly) and when (before or after
setupComplete), whether its pongs come 8-30 s late (emulator seconds) or at once, the setup
latency (the service's 0.3 s, or a
range drawn per setup from the example's seed), replacements that set up for seconds (the
service's "reconnect penalty", ``faults.slow_setups``), and the network round trip, 0-20 ms on
the wall clock: a round trip does not shrink with the emulator's time, so it is given to the
emulator divided by ``SCALE``. Besides the invariants, the ledger's per-move figures hold (see
``check_move_figures``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator.caller import CallerEvent, CallerRecord

from .arena import (
    ASK_TOOL,
    NOTICE,
    QUESTION,
    SCALE,
    WAIT,
    Arena,
    Expect,
    Profile,
    Rig,
    check_invariants,
    check_move_figures,
)

Action = Literal[
    "ask",
    "ask_tool",
    "type",
    "go_away",
    "go_away_at_chunk",
    "go_away_at_tool_call",
    "drop",
    "drop_at_chunk",
    "refuse_next",
    "expire_handles",
    "quiet",
]


@dataclass(frozen=True)
class Step:
    action: Action
    wait: bool
    """Utterances: wait until spoken. Chunk moments: the chunk index is ``3 if wait else 7``."""


STEPS = st.builds(
    Step,
    st.sampled_from(
        [
            "ask",
            "ask",
            "ask_tool",
            "type",
            "go_away",
            "go_away",
            "go_away_at_chunk",
            "go_away_at_tool_call",
            "drop",
            "drop_at_chunk",
            "refuse_next",
            "expire_handles",
            "quiet",
        ]
    ),
    st.booleans(),
)


@dataclass(frozen=True)
class Server:
    """How slow the server and the network are in one example (emulator seconds, but the
    round trip in wall milliseconds)."""

    setup_latency: float | tuple[float, float]
    slow_replacements: float | None
    """Every resumed setup after the warm-up takes this long (None: ``setup_latency``)."""
    round_trip_ms: float
    seed: int
    refuse_resume_while_open: bool
    """The service as measured: a resume is refused while the old connection is open."""
    refusal: str
    """When that refusal comes: before or after setupComplete."""
    pong_latency: float | tuple[float, float]
    """Pongs 8-30 s late (the service as measured, emulator seconds) or prompt."""

    def config(self) -> dict[str, Any]:
        return {
            "setup_latency": self.setup_latency,
            "round_trip": self.round_trip_ms / 1000 / SCALE,
            "seed": self.seed,
            "refuse_resume_while_open": self.refuse_resume_while_open,
            "refuse_resume_while_open_when": self.refusal,
            "pong_latency": self.pong_latency,
        }

    @property
    def slow_setup_wall(self) -> float | None:
        """The slow replacements' setup on the wall clock."""
        return None if self.slow_replacements is None else self.slow_replacements * SCALE


ROUND_TRIPS_MS = (0.0, 1.0, 6.0, 20.0)
"""Wall-clock round trips (the emulator delays every frame, pings included, so the transport
measures what the data takes)."""
SERVERS = st.builds(
    Server,
    st.sampled_from([0.3, 0.3, (0.1, 0.6), (0.3, 1.5)]),
    st.sampled_from([None, None, 2.0, 4.0]),
    st.sampled_from(ROUND_TRIPS_MS),
    st.integers(0, 2**16),
    st.sampled_from([True, True, False]),
    st.sampled_from(["before_setup_complete", "after_setup_complete"]),
    st.sampled_from([(8.0, 30.0), (8.0, 30.0), 0.0]),
)
SCRIPTS = st.tuples(
    st.sampled_from(["gemini", "vertex"]), SERVERS, st.lists(STEPS, min_size=1, max_size=7)
)


class _Script:
    """Plays one script against a rig and notes what the invariants must allow."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.dropped = False
        self.expired = False
        self._listeners: list[Callable[[], None]] = []

    async def play(self, profile: Profile, server: Server, steps: list[Step]) -> None:
        emu = await self.arena.emulator(profile, **server.config())
        rig = self.arena.rig(emu)
        await rig.start()
        await rig.warm_up()
        caller, faults, session = rig.caller, emu.faults, rig.session_id
        if server.slow_replacements is not None:
            faults.slow_setups(1000, server.slow_replacements, resumed_only=True)
        for step in steps:
            action = step.action
            if action in ("ask", "ask_tool"):
                utterance = caller.say(ASK_TOOL if action == "ask_tool" else QUESTION)
                if step.wait:
                    await caller.wait_spoken(utterance, timeout=WAIT)
            elif action == "type":
                caller.type_text("and then")
            elif action == "go_away":
                faults.go_away(NOTICE, session_id=session)
            elif action == "go_away_at_chunk":
                faults.go_away_at(chunk=3 if step.wait else 7, session_id=session)
            elif action == "go_away_at_tool_call":
                faults.go_away_at(on_tool_call=True, session_id=session)
            elif action == "drop":
                self.dropped = faults.drop(session) > 0 or self.dropped
            elif action == "drop_at_chunk":
                self._drop_at(rig, 3 if step.wait else 7)
            elif action == "refuse_next":
                faults.refuse_next(1, "http503")
            elif action == "expire_handles":
                self.expired = faults.expire_handles() > 0 or self.expired
            else:
                await rig.wait_quiet(len(rig.record.moves_started))
        # Scripted moments that never came must not fire while the scenario ends (the slow
        # setups stay: the server is as slow to the end).
        faults.clear()
        if server.slow_replacements is not None:
            faults.slow_setups(1000, server.slow_replacements, resumed_only=True)
        for remove in self._listeners:
            remove()
        await self._quiet(rig)
        await rig.alive()
        await self._quiet(rig)
        await rig.drain()
        ledger = await self.arena.finish()
        assert ledger is not None
        outcomes = tuple(m.outcome for m in rig.record.moves)
        allowed = {MoveOutcome.RESUMED, MoveOutcome.REBUILT}
        assert set(outcomes) <= allowed, outcomes
        if not self.expired:
            assert MoveOutcome.REBUILT not in outcomes, outcomes
        check_invariants(rig, ledger, Expect(outcomes=outcomes, cut_allowed=self.dropped))
        check_move_figures(rig, ledger, slow_setup=server.slow_setup_wall)

    def _drop_at(self, rig: Rig, chunk: int) -> None:
        done: list[CallerEvent] = []

        def at_chunk(event: CallerEvent) -> None:
            if not done and event.kind == "answer_chunk" and event.chunk == chunk:
                done.append(event)
                self.dropped = rig.emu.faults.drop(rig.session_id) > 0 or self.dropped

        self._listeners.append(rig.caller.add_listener(at_chunk))

    @staticmethod
    async def _quiet(rig: Rig) -> None:
        """No move running or owed (every goAway followed by a move's end), no answer open."""

        def quiet(r: CallerRecord) -> bool:
            owed = bool(r.go_aways) and (not r.moves or r.moves[-1].finished_at < r.go_aways[-1][0])
            return not (owed or r.move_in_progress or r.open_generations)

        await rig.caller.wait_until(quiet, timeout=WAIT, what="a quiet conversation")


async def _run(profile: Profile, server: Server, steps: list[Step]) -> None:
    arena = Arena()
    try:
        await _Script(arena).play(profile, server, steps)
    finally:
        await arena.teardown()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(SCRIPTS)
def test_random_interleavings_keep_the_invariants(
    script: tuple[Profile, Server, list[Step]],
) -> None:
    profile, server, steps = script
    asyncio.run(_run(profile, server, steps))
