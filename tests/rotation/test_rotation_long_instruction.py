"""gemini-3.1-flash-live-preview refuses to resume a session whose system instruction is over
about 200 tokens (the emulator's 3.1 profile): each move of such a session is a rebuild from
its history, with nothing the user said lost; a short instruction resumes."""

from __future__ import annotations

import pytest

from realtime_resumption.move_reports import HandleKind, MoveOutcome, MoveReason

from .arena import NOTICE, QUESTION, WAIT, WARM_UP, Arena, Expect, check_invariants

LONG = " ".join(["Answer briefly and kindly, in the caller's own language."] * 20)
"""About 280 tokens (four characters a token)."""


@pytest.mark.parametrize(("instruction", "outcome"), [("Be brief.", "resumed"), (LONG, "rebuilt")])
async def test_a_move_on_3_1_rebuilds_when_the_instruction_is_long(
    arena: Arena, instruction: str, outcome: str
) -> None:
    emu = await arena.emulator("gemini", "gemini-3.1-flash-live-preview")
    rig = arena.rig(emu, transport_options={"system_instruction": instruction})
    await rig.start()
    await rig.warm_up()
    await rig.caller.ask(QUESTION, timeout=WAIT)
    await rig.wait_idle_handle()
    emu.faults.go_away(NOTICE, session_id=rig.session_id)
    await rig.wait_quiet(1)
    await rig.alive()
    ledger = await arena.finish()
    assert ledger is not None
    rebuilt = outcome == "rebuilt"
    check_invariants(
        rig,
        ledger,
        Expect(
            outcomes=(MoveOutcome.REBUILT if rebuilt else MoveOutcome.RESUMED,),
            reasons=(MoveReason.PLANNED,),
            handle_kinds=None if rebuilt else (HandleKind.AFTER_TURN,),
        ),
    )
    refused = [c.refused for c in emu.ledger.sessions[rig.session_id].connections]
    assert "instruction-length" in refused if rebuilt else "instruction-length" not in refused
    if rebuilt:
        new = emu.ledger.sessions[rig.current_session]
        seeded = new.connections[0].client_messages[1]
        assert seeded.text is not None
        assert " ".join(WARM_UP) in seeded.text and " ".join(QUESTION) in seeded.text
