"""The demo's playback: answer audio plays at its own pace into the caller's ear, and a
time-scaled call (``Ear(pace=...)``, the benchmarks') plays it that many times slower."""

from __future__ import annotations

import asyncio

import pytest

from examples.demo.call import Ear
from examples.demo.playback import RealtimePlayer
from realtime_resumption.testing.emulator.audio import answer_audio


@pytest.mark.looptime
@pytest.mark.parametrize("pace", [1.0, 6.0])
async def test_pieces_play_one_after_another_at_the_pace(pace: float) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    ear = Ear(lambda: loop.time() - started, pace=pace)
    player = RealtimePlayer(ear)
    played = asyncio.Event()
    try:
        for chunk in range(3):
            # 40 ms each.
            player.enqueue(answer_audio(7, chunk, ms=40), played.set if chunk == 2 else None)
        await asyncio.wait_for(played.wait(), 10)
    finally:
        await player.aclose()
    assert [(h.turn, h.chunk) for h in ear.chunks] == [(7, 0), (7, 1), (7, 2)]
    assert [h.at for h in ear.chunks] == pytest.approx([0.0, 0.04 * pace, 0.08 * pace])
    assert ear.spans == [(pytest.approx(0.0), pytest.approx(0.12 * pace))]


@pytest.mark.parametrize("pace", [0.0, -1.0, float("nan"), float("inf")])
def test_a_pace_that_is_no_duration_is_refused(pace: float) -> None:
    with pytest.raises(ValueError, match="pace"):
        Ear(lambda: 0.0, pace=pace)
