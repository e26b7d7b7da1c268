"""Long calls by default: our service asks for sliding-window compression unless the settings
turn it off with ``enabled=False``; the stock service asks for none unless enabled."""

from __future__ import annotations

from typing import Any

import pytest
from pipecat.services.google.gemini_live.llm import ContextWindowCompressionParams, InputParams

from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.pipecat.gemini import settings as settings_map
from realtime_resumption.testing.emulator import Emulator

from ..transport.setups import compression, received_setups
from . import services
from .rig import Rig, emulator_config, until

SLIDING = {"slidingWindow": {}}


async def _first_setup(monkeypatch: pytest.MonkeyPatch, build: Any, **options: Any) -> Any:
    """The compression in the setup of a pipeline's first connection."""
    setups = received_setups(monkeypatch)
    async with Emulator(emulator_config()) as emu, Rig([build(emu, **options)]):
        await until(lambda: bool(setups))
    return compression(setups[0])


async def test_ours_asks_for_a_sliding_window_and_stock_for_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await _first_setup(monkeypatch, services.ours) == SLIDING
    assert await _first_setup(monkeypatch, services.stock) is None


async def test_enabled_false_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    off = {"context_window_compression": ContextWindowCompressionParams(enabled=False)}
    assert await _first_setup(monkeypatch, services.ours, settings=off) is None


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ({}, SLIDING),
        (ContextWindowCompressionParams(), SLIDING),
        (ContextWindowCompressionParams(trigger_tokens=9_000), {**SLIDING, "triggerTokens": 9_000}),
        ({"trigger_tokens": 9_000}, {**SLIDING, "triggerTokens": 9_000}),
        (ContextWindowCompressionParams(enabled=True), SLIDING),
        (ContextWindowCompressionParams(enabled=False, trigger_tokens=9_000), None),
        ({"enabled": False}, None),
    ],
)
def test_only_an_explicit_enabled_false_turns_it_off(given: Any, sent: Any) -> None:
    settings = GeminiLiveLLMService.Settings(context_window_compression=given)
    config = settings_map.context_window_compression(settings)
    assert (None if config is None else config.model_dump(by_alias=True, exclude_none=True)) == sent


@pytest.mark.parametrize(
    ("given", "on"),
    [
        (None, True),
        (ContextWindowCompressionParams(), True),
        (ContextWindowCompressionParams(enabled=False), False),
    ],
)
def test_the_deprecated_params_path_reads_the_same(given: Any, on: bool) -> None:
    with pytest.warns(DeprecationWarning):
        service = GeminiLiveLLMService(
            api_key="k", params=InputParams(context_window_compression=given)
        )
    config = settings_map.context_window_compression(service._settings)
    assert (config is not None) is on
