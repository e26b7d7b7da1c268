"""The planned move before the cap: counted from ``session.created``, at a turn boundary, the
next session opened and seeded while the current one serves, then a switch where the user's
input reaches exactly one session. A call over three scaled caps (the emulator closes a
session 300 service-seconds after ``session.created``, 3 s at its time scale) with a
microphone that streams all along; the emulator's ledger is the ground truth.

On loop time (looptime, the emulator in the same loop): the microphone keeps a real one's pace
(a 20 ms frame every 20 ms), the emulator's durations run at its time scale, and neither hangs
on a loaded machine's wall clock; an input stall is loop time the microphone spent waiting."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from realtime_resumption.openai import (
    FunctionTool,
    InputTranscription,
    OpenAIRealtimeTransport,
    SessionConfig,
)
from realtime_resumption.testing.openai_emulator import OpenAIEmulator, user_audio
from realtime_resumption.transport import GenerationEndReason, ToolResult
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import RATE, TIMEOUT, config, speech

pytestmark = pytest.mark.looptime

HEARD = SessionConfig(instructions="Answer briefly.", transcription=InputTranscription("whisper-1"))
CAP = 3.0
"""The cap in loop seconds: 300 service-seconds at the emulator's time scale of 0.01."""
FRAME_MS = 20
"""A microphone frame: 20 ms of audio, sent every 20 ms of the loop's clock."""


class Microphone:
    """Streams 20 ms frames at a real microphone's pace without pause, as a framework does:
    silence, or the speech queued with :meth:`say`. Owned by the test: :meth:`stop` ends it."""

    def __init__(self, t: OpenAIRealtimeTransport) -> None:
        self._t = t
        self._queue: deque[bytes] = deque()
        self._seq = 100_000
        self.spoken: list[int] = []
        self.silent_frames = 0
        """Frames of silence sent so far (the user quiet)."""
        self._sent = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def say(self, first: int, count: int, words: list[str]) -> None:
        self._queue.extend(speech(first, count, words, silence=0))
        self.spoken += range(first, first + count)

    async def pause(self, seconds: float) -> None:
        """Return once the user said what was queued and was then quiet for ``seconds`` of
        audio (bounded: the microphone's own pace plus ``TIMEOUT``)."""
        async with asyncio.timeout(seconds + TIMEOUT):
            while self._queue:
                await self._next_frame()
            target = self.silent_frames + round(seconds * 1000 / FRAME_MS)
            while self.silent_frames < target:
                await self._next_frame()

    async def _next_frame(self) -> None:
        self._sent.clear()
        await self._sent.wait()

    async def _run(self) -> None:
        while True:
            if self._queue:
                frame = self._queue.popleft()
            else:
                self._seq += 1
                frame = user_audio(self._seq, speech=False, ms=FRAME_MS, rate=RATE)
                self.silent_frames += 1
            self._t.send_audio(frame)
            self._sent.set()
            await asyncio.sleep(FRAME_MS / 1000)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_a_call_over_three_caps_cuts_no_answer_loses_no_speech_and_keeps_its_context() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=5, session_cap=300)) as emu:
        t = transport(emu, HEARD, session_cap=CAP, move_margin=1.5, forced_margin=1.0)
        rec = Recorder(t)
        await t.connect()
        mic = Microphone(t)
        try:
            mic.say(0, 5, ["pineapple"])
            await rec.ended(1)
            question = 1
            while len(rec.named("on_move")) < 3:
                mic.say(20 * question, 5, ["question", str(question)])
                await rec.ended(question + 1, timeout=10)
                question += 1
                await mic.pause(0.3)
            mic.say(20 * question, 5, ["recall"])
            await rec.ended(question + 1, timeout=10)
        finally:
            await mic.stop()
            await t.disconnect()

    reports = [m for (m,) in rec.named("on_move")]
    assert [(m.reason, m.outcome) for m in reports][:3] == [("planned", "rebuilt")] * 3
    assert not any(m.turn_cut for m in reports)
    # The moves came before the service's cap: no session was closed by it.
    assert all(s.closed_by == "client" for s in emu.ledger.sessions)
    summary = emu.ledger.summary()
    assert summary.answers_cut == 0
    assert all(r is GenerationEndReason.GENERATION_COMPLETE for _, r in rec.ends)
    assert summary.speech_lost(mic.spoken) == [] and summary.speech_heard_twice == ()
    # The microphone never waited for a session: no stall at any switch, whether the first
    # audio a new session took was the live input or the uncommitted audio given to it.
    gaps = emu.ledger.input_gaps()
    assert len(gaps) >= 3 and max(gaps) < 0.06, gaps
    assert emu.ledger.longest_input_pause < 0.06, emu.ledger.longest_input_pause
    # A word said in the first session is answered after the third move.
    assert "recall pineapple" in rec.transcript


async def test_with_no_boundary_before_the_deadline_the_move_is_forced_and_no_speech_is_lost() -> (
    None
):
    async with OpenAIEmulator(config(answer_chunks=3, session_cap=300)) as emu:
        t = transport(emu, HEARD, session_cap=CAP, move_margin=1.5, forced_margin=1.0)
        rec = Recorder(t)
        await t.connect()
        mic = Microphone(t)
        try:
            mic.say(0, 5, ["pineapple"])
            await rec.ended(1)
            # The user talks from before the notice (1.5 s) past the deadline (2 s): 1 s of
            # speech from about 1.3 s.
            await mic.pause(1.2)
            mic.say(1000, 50, ["a", "long", "monologue"])
            await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
            await rec.ended(2, timeout=10)
        finally:
            await mic.stop()
            await t.disconnect()
    (report,) = [m for (m,) in rec.named("on_move")]
    assert (report.reason, report.outcome) == ("deadline", "rebuilt")
    assert all(s.closed_by == "client" for s in emu.ledger.sessions)
    summary = emu.ledger.summary()
    assert summary.speech_lost(mic.spoken) == [] and summary.speech_heard_twice == ()
    # The monologue was answered by the new session, whole.
    assert "heard a long monologue" in rec.transcript


async def test_a_forced_move_lets_the_answer_in_progress_finish_on_the_old_session() -> None:
    # At a time scale of 0.1: a 6 s cap, its notice at 1.5 s, the deadline at 4.5 s, the
    # switch's own bound at 5.5 s. One answer of 3.4 s (34 chunks of 1 s), asked at 1.2 s,
    # spans the notice and the deadline: the switch waits for its end.
    emulated = config(time_scale=0.1, answer_chunks=34, chunk_ms=1000, session_cap=60)
    async with OpenAIEmulator(emulated) as emu:
        t = transport(emu, HEARD, session_cap=6.0, move_margin=4.5, forced_margin=1.5)
        rec = Recorder(t)
        await t.connect()
        mic = Microphone(t)
        try:
            await mic.pause(1.2)
            mic.say(0, 5, ["long", "story"])
            await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
            await rec.ended(1)
        finally:
            await mic.stop()
            await t.disconnect()
    (report,) = [m for (m,) in rec.named("on_move")]
    assert report.reason == "deadline" and not report.turn_cut
    assert rec.ends[0][1] is GenerationEndReason.GENERATION_COMPLETE
    first = emu.ledger.sessions[0]
    assert [a.outcome for a in first.answers] == ["complete"]
    assert first.closed_by == "client"


async def test_a_tool_call_open_at_the_deadline_is_carried_and_answered_once_in_the_new_session() -> (
    None
):
    weather = FunctionTool("weather", parameters={"type": "object", "properties": {}})
    async with OpenAIEmulator(config(answer_chunks=3, session_cap=300)) as emu:
        t = transport(
            emu,
            SessionConfig(tools=(weather,)),
            session_cap=CAP,
            move_margin=1.5,
            forced_margin=1.0,
        )
        rec = Recorder(t)
        await t.connect()
        for chunk in speech(0, 5, ["weather", "please"]):
            t.send_audio(chunk)
        await rec.until(lambda r: bool(r.tool_calls))
        # The tool runs past the deadline: the move cannot wait for it.
        await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
        (call,) = rec.tool_calls
        t.send_tool_result(ToolResult(call.id, call.name, {"sky": "sunny"}))
        await rec.ended(1, timeout=10)
        await t.disconnect()
    (report,) = [m for (m,) in rec.named("on_move")]
    assert report.reason == "deadline"
    first, second = emu.ledger.sessions
    assert [i.call_id for i in second.seeded if i.type == "function_call"] == [call.id]
    outputs = [i for s in (first, second) for i in s.items if i.type == "function_call_output"]
    assert len(outputs) == 1 and outputs[0] in second.items
    assert len(rec.tool_calls) == 1 and "sunny" in rec.transcript
    assert [r for _, r in rec.ends] == [GenerationEndReason.GENERATION_COMPLETE]
