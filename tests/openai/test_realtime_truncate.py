"""A cut answer stays cut: ``cancel_response`` called again with a truncate after the answer
was truncated (a framework's second interruption of the same playback) never tells the
service the user heard more than the first cut said, over real WebSockets to the emulator."""

from __future__ import annotations

import asyncio

from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from realtime_resumption.transport import CancelResponseOptions
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import TIMEOUT, config, speech


async def test_a_second_cancel_with_truncate_keeps_the_first_cut() -> None:
    async with OpenAIEmulator(config(answer_chunks=20, chunk_ms=100)) as emu:
        t = transport(emu)
        rec = Recorder(t)
        await t.connect()
        for chunk in speech(0, 5, ["long", "story"]):
            t.send_audio(chunk)
        await rec.until(lambda r: len(r.audio) >= 3 * 4800)
        await t.cancel_response(CancelResponseOptions(truncate=0.15, wait_for_done=True))
        await rec.ended(1)
        await t.cancel_response(CancelResponseOptions(truncate="generated"))
        record = emu.ledger.sessions[0]
        # The second cut reaches the service before the session ends.
        async with asyncio.timeout(TIMEOUT):
            while record.client_events["conversation.item.truncate"] < 2:  # noqa: ASYNC110 - no event for it
                await asyncio.sleep(0.005)
        await t.disconnect()
    assert record.answers[0].heard_ms == 150
