"""A move costs the event loop little: a replay is written a bounded batch per loop turn, and
sessions told to move at once spread their moves.

The write loop is measured by counting loop turns, never by the wall clock: a ticker task
counts the turns, and every write notes the count, so the writes that share one count were
made in one turn.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from unittest.mock import ANY

import pytest
from google.genai import types

from realtime_resumption.gemini import connection
from realtime_resumption.gemini.connection import (
    ConnectionHooks,
    LiveConnection,
    WritePacer,
)
from realtime_resumption.gemini.messages import ClientMessage
from realtime_resumption.resumption import STORM_SPREAD_SHARE, ResumptionOptions, SessionResumption
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

MODEL = "gemini-2.0-flash-live-001"
FRAME = b"\x10\x00" * 320  # 20 ms of quiet PCM16 at 16 kHz
HELD_SECONDS = 30
WRITE_BATCH = 16
"""The README's figure (Limits): a replay is written 16 messages per event-loop turn. Not the
package's constant, so that changing it fails here."""


async def _replay(connections: int, messages: int) -> Counter[int]:
    """Queue ``messages`` audio chunks at once on each of ``connections`` connections to
    one emulator (a move's replay each), write them, and count the writes per loop turn."""
    turn = 0
    writes_per_turn: Counter[int] = Counter()
    failed: list[ClientMessage] = []
    done = asyncio.Event()
    total = connections * messages

    def on_written(_: LiveConnection, message: ClientMessage) -> None:
        writes_per_turn[turn] += 1
        if sum(writes_per_turn.values()) == total:
            done.set()

    def on_failed(_: LiveConnection, lost: Sequence[ClientMessage], error: Exception) -> None:
        failed.extend(lost)
        done.set()

    async def ticker() -> None:
        nonlocal turn
        while True:
            turn += 1
            await asyncio.sleep(0)

    hooks = ConnectionHooks(
        message=lambda conn, message: None,
        receive_error=lambda conn, error: None,
        written=on_written,
        write_failed=on_failed,
        closed=lambda conn, code, reason: None,
    )
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        conns = [
            LiveConnection(
                client=emu.client(),
                model=MODEL,
                config=types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO]),
                dial_gen=n,
                handle_supplied=False,
                hooks=hooks,
                owns_client=True,
            )
            for n in range(1, connections + 1)
        ]
        for conn in conns:
            await conn.open(5)
        ticking = asyncio.create_task(ticker())
        try:
            for conn in conns:
                for _ in range(messages):
                    conn.enqueue(ClientMessage.audio(FRAME))
            for conn in conns:
                conn.start()
            async with asyncio.timeout(60):
                await done.wait()
        finally:
            ticking.cancel()
            await asyncio.wait({ticking})
            for conn in conns:
                await conn.close()
    assert failed == []
    assert sum(writes_per_turn.values()) == total
    return writes_per_turn


async def test_a_30_s_replay_is_written_a_batch_per_loop_turn() -> None:
    total = HELD_SECONDS * 50
    writes_per_turn = await _replay(1, total)
    # Bounded work per turn: never more than one batch, so the replay took many turns.
    assert max(writes_per_turn.values()) <= WRITE_BATCH
    assert len(writes_per_turn) >= total // WRITE_BATCH


async def test_replays_on_many_connections_share_one_budget_per_loop_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten sessions replaying at once: their batches alone would make a turn of 160
    writes; together they keep to the process's one time budget. A budget of no time at all
    (the clock is not what is measured here) leaves each turn the one write it always takes,
    whichever connection makes it."""
    loop = asyncio.get_running_loop()
    monkeypatch.setitem(connection._PACERS, loop, WritePacer(share=0, floor=0, ceiling=0))
    writes_per_turn = await _replay(10, 40)
    assert max(writes_per_turn.values()) == 1
    assert len(writes_per_turn) == 400


# -- a storm spreads its moves (loop time fast-forwarded: looptime) --------------------------


class _Driver:
    """Plays one session's transport: records when and with which handle it was moved."""

    def __init__(self, options: ResumptionOptions, draws: Sequence[float]) -> None:
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time()
        self.moves: list[tuple[float, str]] = []
        pending = list(draws)
        self.helper = SessionResumption(self.reconnect, options, spread_draw=lambda: pending.pop(0))

    async def reconnect(self, handle: str) -> None:
        self.moves.append((round(self.loop.time() - self.t0, 6), handle))

    async def until(self, t: float) -> None:
        await asyncio.sleep(max(self.t0 + t - self.loop.time(), 0.0))
        for _ in range(5):
            await asyncio.sleep(0)


@pytest.mark.looptime
async def test_sessions_told_to_move_at_once_spread_their_moves() -> None:
    draws = random.Random(21).random
    sessions = [_Driver(ResumptionOptions(storm_spread=4.0), [draws()]) for _ in range(40)]
    for session in sessions:
        session.helper.resumption_update("handle-of-the-session", True)
    for session in sessions:
        session.helper.go_away(60)
    await sessions[0].until(60)
    times = sorted(session.moves[0][0] for session in sessions)
    assert all(len(session.moves) == 1 for session in sessions)
    assert times[0] < 0.5 and times[-1] > 3.5 and times[-1] < 4.0
    # Without the spread all 40 move at 0; with it, no half second holds a quarter of them.
    busiest = max(sum(1 for t in times if start <= t < start + 0.5) for start in times)
    assert busiest <= len(times) // 4


@pytest.mark.looptime
async def test_the_spread_keeps_to_a_share_of_the_time_before_the_fallback() -> None:
    session = _Driver(ResumptionOptions(storm_spread=10.0), [0.999])
    session.helper.resumption_update("handle-of-the-session", True)
    session.helper.go_away(4)  # fallback at 4 - 4/3 s
    await session.until(4)
    assert session.moves == [(round(0.999 * STORM_SPREAD_SHARE * (4 - 4 / 3), 6), ANY)]


@pytest.mark.looptime
async def test_a_turn_begun_during_the_spread_waits_for_the_next_resumable_point() -> None:
    session = _Driver(ResumptionOptions(storm_spread=4.0), [0.5])
    session.helper.resumption_update("first-handle-0001", True)
    session.helper.go_away(60)
    await session.until(1)
    session.helper.turn_started()
    await session.until(2.5)
    assert session.moves == [], "the spread ended in a turn: no move cuts it"
    session.helper.turn_ended()
    await session.until(3)
    session.helper.resumption_update("second-handle-0002", True)
    await session.until(3)
    assert session.moves == [(3.0, "second-handle-0002")]


@pytest.mark.looptime
async def test_a_new_resumable_handle_during_the_spread_does_not_end_it() -> None:
    session = _Driver(ResumptionOptions(storm_spread=4.0), [0.5])
    session.helper.resumption_update("first-handle-0001", True)
    session.helper.go_away(60)
    await session.until(1)
    session.helper.resumption_update("second-handle-0002", True)
    await session.until(10)
    assert session.moves == [(2.0, "second-handle-0002")]


@pytest.mark.looptime
async def test_a_spread_cut_short_by_a_second_notice_or_disposed_leaves_nothing() -> None:
    session = _Driver(ResumptionOptions(storm_spread=4.0), [0.9])
    session.helper.resumption_update("first-handle-0001", True)
    session.helper.go_away(60)
    session.helper.go_away(0)  # the deadline is now: the move cannot wait its spread
    await session.until(0)
    assert session.moves == [(0.0, "first-handle-0001")]
    assert session.helper.is_idle
    other = _Driver(ResumptionOptions(storm_spread=4.0), [0.9])
    other.helper.resumption_update("first-handle-0001", True)
    other.helper.go_away(60)
    other.helper.dispose()
    assert other.helper.is_idle
    await other.until(60)
    assert other.moves == []


def test_storm_spread_is_checked() -> None:
    with pytest.raises(ValueError, match="storm_spread"):
        ResumptionOptions(storm_spread=-1.0)
