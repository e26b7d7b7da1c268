"""Generation settings (temperature, token limit, sampling, thinking, ...) reach the setup the
service sees, and a change mid-call takes effect through a planned move."""

from __future__ import annotations

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import LiveOptions
from realtime_resumption.move_reports import MoveReason
from realtime_resumption.testing.emulator import Emulator
from realtime_resumption.transport import GenerationSettings, SessionUpdate

from .transport_helpers import (
    Recorder,
    answered_with_handle,
    emulator_config,
    established,
    make_transport,
)

SETTINGS = GenerationSettings(
    temperature=0.25,
    max_output_tokens=200,
    top_p=0.9,
    top_k=20,
    presence_penalty=0.5,
    frequency_penalty=0.25,
    seed=7,
    media_resolution="MEDIA_RESOLUTION_LOW",
    thinking={"thinking_budget": 0},
    enable_affective_dialog=True,
    proactivity={"proactive_audio": True},
)


async def test_every_setting_reaches_the_setup_and_an_update_moves_the_session() -> None:
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, generation=SETTINGS)
        rec = Recorder(transport)
        await transport.connect()
        # A first turn, so that the session has a handle to move with.
        await answered_with_handle(transport, rec, "hello")
        await transport.update_session(
            SessionUpdate(generation=GenerationSettings(temperature=0.75))
        )
        await rec.wait_for("on_move")
        await transport.disconnect()

    (move,) = rec.moves
    assert move.reason is MoveReason.CONFIG
    (session,) = emu.ledger.sessions.values()
    first, second = (c.setup for c in established(session))
    assert first is not None and second is not None
    assert first.generation == {
        "temperature": 0.25,
        "max_output_tokens": 200,
        "top_p": 0.9,
        "top_k": 20,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "seed": 7,
        "media_resolution": "MEDIA_RESOLUTION_LOW",
        "thinking_config": {"thinking_budget": 0},
        "enable_affective_dialog": True,
        "proactivity": {"proactive_audio": True},
    }
    # The update changes what it names and keeps the rest.
    assert second.generation == {**first.generation, "temperature": 0.75}


def test_no_settings_leave_the_setup_to_the_service() -> None:
    config = LiveOptions().live_connect_config()
    assert config.temperature is None and config.generation_config is None
    assert config.thinking_config is None and config.proactivity is None


@pytest.mark.parametrize(
    "bad",
    [GenerationSettings(thinking="none"), GenerationSettings(temperature="hot")],  # type: ignore[arg-type]
)
def test_a_setting_the_service_cannot_take_fails_at_construction(
    bad: GenerationSettings,
) -> None:
    with pytest.raises(ValueError, match="invalid generation settings"):
        GeminiLiveTransport(api_key="k", generation=bad)
