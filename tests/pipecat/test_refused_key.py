"""HTTP 403 end to end in a real pipeline: a move's dial refused as the service refuses a key
that lost its permission ends the session at once, with one ``SessionLostFrame`` and one fatal
``ErrorFrame`` (the service marked unusable, as Pipecat 1.14 says fatal) that says to check
the key (README, Pipecat and Limits)."""

from __future__ import annotations

from pipecat.frames.frames import ErrorFrame, InputTextRawFrame, LLMFullResponseEndFrame

from realtime_resumption.frames import (
    SessionLostFrame,
    SessionMovedFrame,
    SessionResumptionUpdateFrame,
)
from realtime_resumption.testing.emulator import Emulator

from . import services
from .rig import Rig, emulator_config


async def test_a_403_during_a_move_loses_the_session_with_one_fatal_error() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await rig.wait(lambda: rig.count(SessionResumptionUpdateFrame) >= 1)
            emu.faults.refuse_next(1, "http403")
            emu.faults.drop()
            await rig.wait(lambda: rig.count(ErrorFrame, up=True) >= 1)
            outcomes = [a.outcome for a in emu.ledger.attempts]

    assert outcomes[1:] == ["http403"], "one refused attempt, never retried"
    (lost,) = rig.of(SessionLostFrame)
    assert "HTTP 403" in lost.error and "check the API key" in lost.error
    (error,) = rig.of(ErrorFrame, up=True)
    # Fatal in Pipecat 1.14's terms: the service is marked unusable (force_treat_as_permanent).
    assert error.processor is service and not service.is_usable
    assert "session lost" in error.error and "check the API key" in error.error
    assert rig.of(SessionMovedFrame) == []
