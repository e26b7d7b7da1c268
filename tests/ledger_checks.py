"""What the emulator's ledger must show after moves: nothing the user said lost.

The replay rule does not replay silence in its uncertain window (the margin before a handle's
arrival), so a move may leave a few silent chunks out; the user's speech never.
"""

from __future__ import annotations

from realtime_resumption.emulator.ledger import MoveSummary, SessionSummary

SILENCE_LOST_PER_MOVE = 25
"""Silent chunks (0.5 s of 20 ms audio) a move may leave out: those of the replay rule's
uncertain window, which are not worth replaying. The window is the margin before a handle's
arrival plus twice the event loop's recent lag: at the fastest caller pace the tests use (a
20 ms chunk every 5 ms) and on a loaded machine, up to about a hundred milliseconds of wall
time."""


def assert_nothing_said_lost(summary: SessionSummary | MoveSummary) -> None:
    """No speech lost, and no more silence than ``SILENCE_LOST_PER_MOVE`` a move."""
    assert summary.speech_lost == (), f"speech lost: {summary.speech_lost}"
    silence = [seq for seq in summary.audio_lost if seq not in summary.speech_lost]
    moves = len(summary.moves) if isinstance(summary, SessionSummary) else 1
    assert len(silence) <= SILENCE_LOST_PER_MOVE * max(1, moves), f"silence lost: {silence}"
