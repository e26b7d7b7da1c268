"""gemini-3.8-live through a whole Pipecat pipeline: the connection's life ends with 1011
"Deadline expired" and no goAway while the user speaks, the resume after it is refused with
1007, and our service rebuilds the session with the conversation so far; the rebuilt session
hears the whole question and answers it, and the app sees a move, not an error."""

from __future__ import annotations

from pipecat.frames.frames import ErrorFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair

from realtime_resumption.frames import GenerationEndedFrame, SessionMovedFrame
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..ledger_checks import assert_rebuilt_after_the_deadline
from . import services
from .devices import Microphone, Speaker
from .rig import PushLog, Rig, until

SCALE = 0.2
CUT = ["and", "what", "about", "tomorrow"]


async def test_a_deadline_close_then_1007_rebuilds_with_the_history_and_loses_no_speech() -> None:
    config = EmulatorConfig.model("gemini-3.8-live", time_scale=SCALE)
    async with Emulator(config) as emu:
        pair = LLMContextAggregatorPair(LLMContext())
        mic, speaker = Microphone(SCALE), Speaker(SCALE)
        service = services.ours(emu)
        log = PushLog()
        log.source = service
        async with Rig(
            [mic, pair.user(), service, speaker, pair.assistant()], observers=[log]
        ) as rig:
            await rig.run_bot()
            mic.open()
            mic.say(["what", "is", "new"])
            await rig.wait(lambda: log.count(GenerationEndedFrame) >= 1)
            (old,) = emu.ledger.sessions.values()
            # The handle that follows the answer (the service issues none before it).
            await until(lambda: bool(old.handles))
            # The connection's life ends in the middle of the next question.
            before = len(mic.spoken)
            mic.say(CUT)
            await until(lambda: len(mic.spoken) >= before + 5)
            assert await emu.faults.deadline_close() == 1
            await rig.wait(lambda: log.count(SessionMovedFrame) >= 1)
            await rig.wait(lambda: log.count(GenerationEndedFrame) >= 2)
            cut = mic.spoken[before:]
            new = next(s for s in emu.ledger.sessions.values() if s is not old)
            await until(lambda: set(cut) <= set(new.audio_received))
            await mic.mute()
            errors = rig.of(ErrorFrame, up=True) + rig.of(ErrorFrame)

    (moved,) = [f.report for f in log.frames() if isinstance(f, SessionMovedFrame)]
    assert (moved.reason, moved.outcome) == (MoveReason.LOST, MoveOutcome.REBUILT)
    # The rebuilt session was seeded with the first question and heard the whole second one.
    assert_rebuilt_after_the_deadline(old, new, "what is new")
    said = " ".join(CUT)
    assert [(said in t.user_text, t.outcome) for t in new.turns.values()] == [(True, "complete")]
    assert errors == []
