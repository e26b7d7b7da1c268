"""Random interleavings of user input, model output, tool calls, goAways and drops against the
emulator keep every rotation invariant (see conftest's ``check_invariants``).

Each example is a short script run on a fresh emulator, transport and caller: utterances
(questions and tool requests, waited for or not), typed text, goAways and drops now or at a
chosen answer chunk or tool call, a refused attempt, expired handles, and pauses until the
conversation is quiet. It ends with a further user turn that must be answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from realtime_resumption.emulator.caller import CallerEvent, CallerRecord
from realtime_resumption.moves import MoveOutcome

from .arena import (
    ASK_TOOL,
    NOTICE,
    QUESTION,
    WAIT,
    Arena,
    Expect,
    Profile,
    Rig,
    check_invariants,
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
SCRIPTS = st.tuples(st.sampled_from(["gemini", "vertex"]), st.lists(STEPS, min_size=1, max_size=7))


class _Script:
    """Plays one script against a rig and notes what the invariants must allow."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.dropped = False
        self.expired = False
        self._listeners: list[Callable[[], None]] = []

    async def play(self, profile: Profile, steps: list[Step]) -> None:
        emu = await self.arena.emulator(profile)
        rig = self.arena.rig(emu)
        await rig.start()
        await rig.warm_up()
        caller, faults, session = rig.caller, emu.faults, rig.session_id
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
        # Scripted moments that never came must not fire while the scenario ends.
        faults.clear()
        for remove in self._listeners:
            remove()
        await self._quiet(rig)
        await rig.alive()
        await self._quiet(rig)
        ledger = await self.arena.finish()
        assert ledger is not None
        outcomes = tuple(m.outcome for m in rig.record.moves)
        allowed = {MoveOutcome.RESUMED, MoveOutcome.REBUILT}
        assert set(outcomes) <= allowed, outcomes
        if not self.expired:
            assert MoveOutcome.REBUILT not in outcomes, outcomes
        check_invariants(rig, ledger, Expect(outcomes=outcomes, cut_allowed=self.dropped))

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


async def _run(profile: Profile, steps: list[Step]) -> None:
    arena = Arena()
    try:
        await _Script(arena).play(profile, steps)
    finally:
        await arena.teardown()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(SCRIPTS)
def test_random_interleavings_keep_the_invariants(script: tuple[Profile, list[Step]]) -> None:
    profile, steps = script
    asyncio.run(_run(profile, steps))
