"""The service tells the pipeline a goAway came: ``GoAwayFrame`` with the notice, downstream,
before the move's own frames (README, Pipecat: "Each move shows up as frames ... GoAwayFrame,
SessionMovingFrame, SessionMovedFrame"). A real pipeline on the emulator's defaults."""

from __future__ import annotations

import pytest
from pipecat.frames.frames import InputTextRawFrame, LLMFullResponseEndFrame

from realtime_resumption.frames import (
    GoAwayFrame,
    SessionMovedFrame,
    SessionMovingFrame,
    SessionResumptionUpdateFrame,
)
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.testing.emulator import Emulator

from . import services
from .rig import TIME_SCALE, Rig, emulator_config

NOTICE = 5.0
"""Emulator seconds; the wire carries them scaled by ``TIME_SCALE``."""


async def test_a_go_away_is_pushed_downstream_with_its_notice_before_the_move() -> None:
    async with Emulator(emulator_config()) as emu:
        service = services.ours(emu)
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
            await rig.wait(lambda: rig.count(SessionResumptionUpdateFrame) >= 1)
            assert emu.faults.go_away(NOTICE).count == 1
            await rig.wait(lambda: rig.count(SessionMovedFrame) >= 1)

    (go_away,) = rig.of(GoAwayFrame)
    assert go_away.time_left == pytest.approx(NOTICE * TIME_SCALE)
    (moved,) = rig.of(SessionMovedFrame)
    assert moved.report.outcome is MoveOutcome.RESUMED
    order = [
        type(f)
        for f in rig.down.frames
        if isinstance(f, (GoAwayFrame, SessionMovingFrame, SessionMovedFrame))
    ]
    assert order == [GoAwayFrame, SessionMovingFrame, SessionMovedFrame]
    assert rig.of(GoAwayFrame, up=True) == []
