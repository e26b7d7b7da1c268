"""Long calls by default: our model asks for sliding-window compression unless
``context_window_compression=None`` turns it off; the Google plugin asks for none unless
given one."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import types
from livekit.agents import Agent, AgentSession

from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..transport.setups import compression, received_setups
from .lk_helpers import ModelKind, make_model, until

SLIDING = {"slidingWindow": {}}


async def _first_setup(monkeypatch: pytest.MonkeyPatch, kind: ModelKind, **kwargs: Any) -> Any:
    """The compression in the setup of an AgentSession's first connection."""
    setups = received_setups(monkeypatch)
    async with Emulator(EmulatorConfig(time_scale=0.1)) as emu:
        session = AgentSession(llm=make_model(kind, emu, **kwargs), aec_warmup_duration=None)
        await session.start(Agent(instructions="Be helpful."))
        try:
            await until(lambda: bool(setups))
        finally:
            await session.aclose()
    return compression(setups[0])


async def test_ours_asks_for_a_sliding_window_and_stock_for_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await _first_setup(monkeypatch, "ours") == SLIDING
    assert await _first_setup(monkeypatch, "stock") is None


async def test_none_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _first_setup(monkeypatch, "ours", context_window_compression=None) is None


async def test_a_given_compression_is_sent_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    given = types.ContextWindowCompressionConfig(
        trigger_tokens=12_000, sliding_window=types.SlidingWindow()
    )
    assert await _first_setup(monkeypatch, "ours", context_window_compression=given) == {
        **SLIDING,
        "triggerTokens": 12_000,
    }
