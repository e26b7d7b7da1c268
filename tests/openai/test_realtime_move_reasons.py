"""The OpenAI transport reports its moves with the shared ``MoveReason`` spelling: a drop is
``lost`` and ``reconnect`` is ``requested`` (the cap's ``planned`` and ``deadline`` are
``test_realtime_planned_move``'s, a takeover's ``takeover`` ``test_realtime_store``'s). The
``openai`` SDK over real WebSockets to the bundled emulator."""

from __future__ import annotations

from realtime_resumption.move_reports import HandleKind, MoveReason
from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import config


async def test_a_drop_is_reported_lost_and_a_reconnect_requested() -> None:
    async with OpenAIEmulator(config()) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect()
        assert emu.faults.drop() == 1
        await rec.until(lambda r: len(r.named("on_move")) == 1)
        await t.reconnect()
        await rec.until(lambda r: len(r.named("on_move")) == 2)
        await t.disconnect()

    assert rec.named("on_move_started") == [
        (MoveReason.LOST, HandleKind.NONE),
        (MoveReason.REQUESTED, HandleKind.NONE),
    ]
    reports = [m for (m,) in rec.named("on_move")]
    assert [(m.reason, m.outcome) for m in reports] == [
        ("lost", "rebuilt"),
        ("requested", "rebuilt"),
    ]
