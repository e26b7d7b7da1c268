"""What the emulator's ledger must show after moves: nothing the user said lost.

Silence may be missing by design: a move does not replay silence in the replay rule's
uncertain window (the margin before a handle's arrival), and held input keeps only the edges
of a long silence (``OutboxLimits.silence_padding``). The user's speech never.
"""

from __future__ import annotations

from realtime_resumption.testing.emulator.ledger import MoveSummary, SessionSummary


def assert_nothing_said_lost(summary: SessionSummary | MoveSummary) -> None:
    """No chunk of the user's speech lost."""
    assert summary.speech_lost == (), f"speech lost: {summary.speech_lost}"
