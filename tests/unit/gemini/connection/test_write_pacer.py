"""The write loops' budget per event-loop turn, decided on a fake clock."""

from __future__ import annotations

import pytest

from realtime_resumption.gemini.connection import (
    TURN_WRITE_CEILING,
    TURN_WRITE_FLOOR,
    TURN_WRITE_SHARE,
    WritePacer,
)

WRITE = 0.00005
"""What one message costs to write, in these tests (about the SDK's serialising of a 20 ms
audio chunk)."""


def _write_turn(pacer: WritePacer, now: float, backlog: int) -> int:
    """Begin a turn at ``now`` and write from ``backlog`` while the pacer allows: returns how
    many were written."""
    pacer.turn_began(now)
    written = 0
    clock = now
    while written < backlog and pacer.may_write():
        pacer.wrote(pacer.turn, clock, clock + WRITE)
        clock += WRITE
        written += 1
    return written


def _fills(written: int, seconds: float) -> bool:
    """``written`` messages are what ``seconds`` of writing allow: the turn ends with the
    write that crosses it."""
    return seconds / WRITE - 1e-6 <= written <= seconds / WRITE + 1 + 1e-6


def test_what_is_due_in_real_time_is_written_however_long_the_turns() -> None:
    """150 calls submit 7,500 messages a second: whatever the turns' length, each writes
    what was submitted since the one before (it costs less than the share of that time)."""
    rate = 7500
    assert rate * WRITE < TURN_WRITE_SHARE
    pacer = WritePacer()
    now = 0.0
    _write_turn(pacer, now, 0)
    for period in (0.001, 0.005, 0.02, 0.03, 0.002):
        now += period
        due = round(rate * period)
        assert _write_turn(pacer, now, due) == due


def test_a_backlog_is_written_a_bounded_time_per_turn() -> None:
    pacer = WritePacer()
    _write_turn(pacer, 0.0, 0)
    # After a long turn (or a long time without writes): at most the ceiling.
    written = _write_turn(pacer, 1.0, 100_000)
    assert _fills(written, TURN_WRITE_CEILING)
    # After a short one: the floor, so a replay on an idle loop still moves.
    written = _write_turn(pacer, 1.0 + 0.0001, 100_000)
    assert _fills(written, TURN_WRITE_FLOOR)
    # In between: the share of the time since the previous turn.
    written = _write_turn(pacer, 1.0001 + 0.02, 100_000)
    assert _fills(written, TURN_WRITE_SHARE * 0.02)


def test_the_shipped_budget_is_the_readmes() -> None:
    """The README's figures (Limits), not the package's constants: half the time since the
    previous turn, between 4 and 20 ms a turn."""
    pacer = WritePacer()
    _write_turn(pacer, 0.0, 0)
    assert _fills(_write_turn(pacer, 1.0, 100_000), 0.020)
    assert _fills(_write_turn(pacer, 1.0 + 0.001, 100_000), 0.004)
    assert _fills(_write_turn(pacer, 1.001 + 0.016, 100_000), 0.008)


def test_a_turn_always_takes_its_first_write() -> None:
    pacer = WritePacer(share=0, floor=0, ceiling=0)
    for turn in range(3):
        assert _write_turn(pacer, turn * 0.01, 5) == 1


def test_a_write_that_waited_for_the_socket_is_not_the_turn_it_ended_in() -> None:
    pacer = WritePacer(share=0.5, floor=0.001, ceiling=0.001)
    pacer.turn_began(0.0)
    began_in = pacer.turn
    pacer.turn_began(0.5)
    pacer.wrote(began_in, 0.0, 0.5)  # suspended on a full socket buffer for half a second
    assert pacer.may_write()
    pacer.wrote(pacer.turn, 0.5, 0.5 + 0.002)
    assert not pacer.may_write()


def test_the_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="share"):
        WritePacer(share=1.5)
    with pytest.raises(ValueError, match="floor"):
        WritePacer(floor=0.03, ceiling=0.02)
    with pytest.raises(ValueError, match="floor"):
        WritePacer(floor=-1)
