"""``examples/pipecat_bot.py`` runs offline: every answer whole, the tool called, and the
connection rotated under the conversation without a cut."""

from __future__ import annotations

from examples import pipecat_bot
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..ledger_checks import assert_nothing_said_lost


async def test_the_pipecat_bot_answers_through_rotations(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    # The example's own emulator settings, at full speed: a notice under a second would
    # leave no time to finish an answer before the move.
    config = EmulatorConfig(rotate_every=3.0, notice=2.0, answer_chunks=10)
    async with Emulator(config) as emu:
        lines = await pipecat_bot.main(emu)
        (session,) = emu.ledger.summary().sessions.values()
    answers = [line for line in lines if line.startswith("bot answered")]
    assert answers == ["bot answered (generation_complete)"] * 4
    assert [line for line in lines if line.startswith("user:")] == [
        f"user: {q}" for q in pipecat_bot.QUESTIONS
    ]
    assert any(line.startswith("tool weather: {") for line in lines)
    moves = [line for line in lines if line.startswith("move ")]
    assert moves and all(": resumed" in line for line in moves)
    assert session.answers_cut == ()
    assert_nothing_said_lost(session)
