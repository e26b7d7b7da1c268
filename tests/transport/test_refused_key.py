"""HTTP 403 end to end: the emulator refuses a move's dial as the service refuses a key that lost
its permission, and the session ends at once with a ``SessionLostError`` that says to check the
key (README, Limits: "HTTP 401/403 end the session at once"). The adapters' forms of the same
are in ``tests/pipecat/test_refused_key.py`` and ``tests/livekit/test_lk_refused_key.py``.
"""

from __future__ import annotations

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome
from realtime_resumption.resumption import ResumptionOptions
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import ConnectError, ContentTurn, SessionLostError

from .transport_helpers import MODEL, TIME_SCALE, Recorder

RETRIES = ResumptionOptions(retry_delays=(0.0, 0.05, 0.1), attempt_timeout=2.0)
"""Quick retries, so a retried 403 would show as more than one attempt within the test."""


@pytest.mark.parametrize("profile", ["gemini", "vertex"])
async def test_a_403_during_a_move_ends_the_session_at_once_and_says_to_check_the_key(
    profile: str,
) -> None:
    async with Emulator(EmulatorConfig(profile=profile, time_scale=TIME_SCALE)) as emu:  # type: ignore[arg-type]
        transport = GeminiLiveTransport(
            client=emu.client(vertex=profile == "vertex"), model=MODEL, resumption=RETRIES
        )
        rec = Recorder(transport)
        await transport.connect()
        transport.send_live_text([ContentTurn("user", "hello")])
        await rec.wait(lambda r: any(h and ok for h, ok, _ in r.of("on_resumption_update")))
        emu.faults.refuse_next(1, "http403")
        emu.faults.drop()
        await rec.wait_for("on_close", timeout=10.0)
        connected = transport.is_connected
        await transport.disconnect()
        outcomes = [a.outcome for a in emu.ledger.attempts]

    assert outcomes[1:] == ["http403"], "one refused attempt, never retried"
    assert not connected
    (move,) = rec.moves
    assert (move.outcome, move.attempts) == (MoveOutcome.LOST, 1)
    errors = [event.error for (event,) in rec.of("on_error")]
    assert len(errors) == 1
    (error,) = errors
    assert isinstance(error, SessionLostError)
    assert not rec.of("on_error")[0][0].recoverable
    assert "HTTP 403" in str(error) and "check the API key" in str(error)
    assert rec.names("on_error", "on_close") == ["on_error", "on_close"]


async def test_a_403_on_the_first_dial_fails_connect_with_the_status() -> None:
    async with Emulator(EmulatorConfig(time_scale=TIME_SCALE)) as emu:
        emu.faults.refuse_next(1, "http403")
        transport = GeminiLiveTransport(client=emu.client(), model=MODEL)
        with pytest.raises(ConnectError) as caught:
            await transport.connect()
        await transport.disconnect()
        outcomes = [a.outcome for a in emu.ledger.attempts]
    assert outcomes == ["http403"]
    assert (caught.value.failure.kind, caught.value.failure.code) == ("refused", 403)
    assert not transport.is_connected
