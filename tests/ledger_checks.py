"""What the emulator's ledger must show after moves: nothing the user said lost, and the
3.8 model's rebuild after a connection's end of life.

Silence may be missing by design: a move does not replay silence in the replay rule's
uncertain window (the margin before a handle's arrival), and held input keeps only the edges
of a long silence (``OutboxLimits.silence_padding``). The user's speech never.
"""

from __future__ import annotations

from realtime_resumption.testing.emulator.ledger import MoveSummary, SessionRecord, SessionSummary


def assert_nothing_said_lost(summary: SessionSummary | MoveSummary) -> None:
    """No chunk of the user's speech lost."""
    assert summary.speech_lost == (), f"speech lost: {summary.speech_lost}"


def assert_rebuilt_after_the_deadline(
    old: SessionRecord, new: SessionRecord, first_question: str
) -> None:
    """The 3.8 model's end of a connection's life, as the ledger has it: ``old``'s connection
    closed 1011 with no goAway, the resume after it refused 1007 (``deadline``), and ``new``
    (the rebuilt session) seeded with the history, ``first_question`` in it."""
    first, refused = old.connections
    assert (first.close_code, refused.refused, refused.close_code) == (1011, "deadline", 1007)
    assert "go_away" not in [m.kind for m in first.server_messages]
    (fresh,) = new.connections
    seeded = fresh.client_messages[1]
    assert seeded.kind == "client_content" and seeded.text and first_question in seeded.text
