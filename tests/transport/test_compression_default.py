"""Long calls by default: the transport's setup asks for sliding-window compression unless the
caller turns it off (the service ends an audio session at 15 minutes without it)."""

from __future__ import annotations

import pytest
from google.genai import types

from realtime_resumption.gemini.live_options import sliding_window
from realtime_resumption.testing.emulator import Emulator

from .setups import compression, received_setups
from .transport_helpers import Recorder, emulator_config, make_transport


async def _setups_of(monkeypatch: pytest.MonkeyPatch, **options: object) -> list[object]:
    setups = received_setups(monkeypatch)
    async with Emulator(emulator_config("gemini")) as emu:
        transport = make_transport(emu, **options)
        Recorder(transport)
        await transport.connect()
        await transport.disconnect()
    return [compression(setup) for setup in setups]


async def test_the_setup_asks_for_a_sliding_window_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await _setups_of(monkeypatch) == [{"slidingWindow": {}}]


async def test_none_turns_compression_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _setups_of(monkeypatch, context_window_compression=None) == [None]


async def test_a_configured_compression_is_sent_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    given = types.ContextWindowCompressionConfig(
        trigger_tokens=20_000, sliding_window=types.SlidingWindow(target_tokens=10_000)
    )
    assert await _setups_of(monkeypatch, context_window_compression=given) == [
        {"triggerTokens": 20_000, "slidingWindow": {"targetTokens": 10_000}}
    ]


def test_each_default_is_a_fresh_sliding_window() -> None:
    first, second = sliding_window(), sliding_window(8_000)
    assert first == types.ContextWindowCompressionConfig(sliding_window=types.SlidingWindow())
    assert second.trigger_tokens == 8_000 and first.trigger_tokens is None
