"""What a service's emulator's ledger says of the ``--takeover`` call: one shape for each
service's reading of it (``takeover_lane.GeminiLedger``, ``openai_takeover.OpenAILedger``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LedgerFigures:
    """What one service's emulator's ledger says of the call."""

    kept: frozenset[int]
    """The user's chunks a session heard and kept."""
    sessions: int
    connections: int
    answers: tuple[str, ...]
    tool_calls_issued: int
    tool_responses: int
    tool_responses_stray: int
    next_answered: bool
    context: tuple[str, ...]
    recalled: str | None
    resent: int | None
    heard_twice: int | None
    """The user's chunks the service heard twice (None where the ledger does not say)."""
