"""Headers asked for at every dial (``OpenAIRealtimeOptions.dial_headers``): credentials that
expire within a call reach each new session fresh, and a provider of them that fails is retried
like an unreachable service, its message (which may hold a credential) never repeated. The
``openai`` SDK over real WebSockets to the bundled emulator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from realtime_resumption.testing.openai_emulator import OpenAIEmulator
from tests.openai.transport_helpers import Recorder, transport
from tests.openai_emulator.oai_helpers import config


async def test_each_new_session_dials_with_the_headers_asked_for_at_its_dial() -> None:
    asked: list[str] = []
    failures = ["a refresh that failed: token sk-secret-refresh"]

    async def headers() -> Mapping[str, str]:
        if len(asked) == 1 and failures:
            raise RuntimeError(failures.pop())
        asked.append(f"Bearer token-{len(asked)}")
        return {"Authorization": asked[-1]}

    async with OpenAIEmulator(config(api_key="token-0")) as emu:
        t = transport(
            emu, client=emu.client(api_key="unused"), dial_headers=headers, retry_delays=(0.0, 0.01)
        )
        rec = Recorder(t)
        await t.connect()
        emu.config = replace(emu.config, api_key="token-1")
        emu.faults.drop()
        await rec.until(lambda r: bool(r.named("on_move")), timeout=10)
        assert t.is_connected
        await t.disconnect()
    assert asked == ["Bearer token-0", "Bearer token-1"]
    assert not emu.ledger.refused
    (failed,) = [e for (e,) in rec.named("on_error") if e.recoverable]
    assert "RuntimeError" in str(failed.error) and "sk-secret" not in str(failed.error)
