"""A hostile server, against the emulator: connections that die right after their switch,
credentials refused during a move. Each ends the session with a clear ``SessionLostError``
within the retry budget instead of redialling forever or spending the budget on a fatal
refusal."""

from __future__ import annotations

import asyncio

import pytest

from realtime_resumption.failures import RetryPolicy
from realtime_resumption.gemini import Credential, GeminiLiveTransport
from realtime_resumption.move_reports import MoveOutcome, MoveReason
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import SessionLostError

from ..transport.transport_helpers import connected_and_answered
from .rotation_helpers import (
    FAST,
    MODEL,
    Recorder,
    answered_with_handle,
    emulator_config,
    make_transport,
)

PROBATION = 0.5


def _lost_error(rec: Recorder) -> SessionLostError:
    errors = [event.error for (event,) in rec.of("on_error") if not event.recoverable]
    assert len(errors) == 1, errors
    error = errors[0]
    assert isinstance(error, SessionLostError)
    return error


@pytest.mark.parametrize("after", [0.0, 0.7 * PROBATION], ids=["at-the-switch", "after-settle"])
async def test_a_server_that_kills_every_new_connection_ends_the_session(after: float) -> None:
    """Each new connection dies right after the switch (or a little later, still within its
    probation): every one is a failed attempt of the move, so the session dials once per
    retry delay, then is lost. Before, each move "succeeded" and the transport redialled
    without end (~450 dials in 8 s)."""
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, retry_budget=RetryPolicy(probation=PROBATION))
        rec = Recorder(transport)
        loop = asyncio.get_running_loop()

        def kill(*_: object) -> None:
            loop.call_later(after, emu.faults.drop)

        await transport.connect()
        await answered_with_handle(transport, rec)
        transport.on_move = lambda report: (rec.events.append(("on_move", (report,))), kill())
        emu.faults.drop()
        await rec.wait_for("on_close", timeout=10)
        await transport.disconnect()

    setups = [e for e in rec.lifecycle("setup-ok")]
    assert len(setups) == 1 + len(FAST.retry_delays), "one dial per retry delay, no more"
    moves = rec.moves
    assert moves[-1].outcome is MoveOutcome.LOST
    assert all(m.reason is MoveReason.LOST for m in moves)
    assert "every attempt failed" in _lost_error(rec).args[0]
    assert not transport.is_connected


async def test_credentials_refused_during_a_move_end_the_session_at_once() -> None:
    """A 401 on the move's dial is fatal: one attempt, no retries charged to the budget, and a
    message that says what to fix."""

    async def credential() -> Credential:
        return Credential("emulator-key")

    async with Emulator(emulator_config("gemini")) as emu:
        http_options = emu.http_options()
        transport = GeminiLiveTransport(
            model=MODEL,
            http_options=http_options,
            credential_provider=credential,
            resumption=FAST,
        )
        rec = await connected_and_answered(transport)
        # The key is revoked: every later dial presents a blank one, which the service
        # refuses with 401.
        http_options.headers = {**(http_options.headers or {}), "x-goog-api-key": " "}
        emu.faults.drop()
        await rec.wait_for("on_close", timeout=10)
        await transport.disconnect()
        refused = [a for a in emu.ledger.attempts if a.outcome == "http401"]

    assert len(refused) == 1, "no retry after a 401"
    (move,) = rec.moves
    assert (move.outcome, move.attempts) == (MoveOutcome.LOST, 1)
    text = _lost_error(rec).args[0]
    assert "HTTP 401" in text and "API key" in text
