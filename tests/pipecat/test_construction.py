"""The constructors are the stock 1.14 ones (every parameter, name, default and deprecation
warning) plus the rotation options; the Vertex service works offline against the emulator in
Vertex mode, turning credentials into a token only when it dials."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest
from pipecat.frames.frames import InputTextRawFrame, LLMFullResponseEndFrame
from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as StockService
from pipecat.services.google.gemini_live.llm import InputParams
from pipecat.services.google.gemini_live.vertex.llm import (
    GeminiLiveVertexLLMService as StockVertexService,
)

from realtime_resumption.emulator import Emulator
from realtime_resumption.gemini import Credential
from realtime_resumption.pipecat import GeminiLiveLLMService, GeminiLiveVertexLLMService

from .rig import MODEL, Rig, emulator_config

ROTATION = {"resumption", "input_buffer", "retry_budget", "resume_watchdog"}


def _parameters(cls: type) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(cls.__init__).parameters)


@pytest.mark.parametrize(
    ("ours", "stock", "extra"),
    [
        (GeminiLiveLLMService, StockService, ROTATION),
        (
            GeminiLiveVertexLLMService,
            StockVertexService,
            ROTATION | {"transparent", "credential_provider"},
        ),
    ],
)
def test_the_constructor_is_the_stock_one_plus_rotation_options(
    ours: type, stock: type, extra: set[str]
) -> None:
    mine, theirs = _parameters(ours), _parameters(stock)
    assert set(mine) - set(theirs) == extra
    for name, parameter in theirs.items():
        assert name in mine, name
        assert (mine[name].kind, mine[name].default) == (parameter.kind, parameter.default), name
    # In the stock order, with ours after them (before **kwargs).
    assert [n for n in mine if n in theirs] == list(theirs)


def _warnings(make: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
    return sorted(str(w.message) for w in caught if issubclass(w.category, DeprecationWarning))


def test_deprecated_arguments_warn_as_stock_and_land_in_the_settings() -> None:
    kwargs: dict[str, Any] = {
        "api_key": "k",
        "model": "gemini-live-2.5-flash-preview",
        "voice_id": "Puck",
        "params": InputParams(temperature=0.5),
    }
    stock_warnings = _warnings(lambda: StockService(**kwargs))
    our_warnings = _warnings(lambda: GeminiLiveLLMService(**kwargs))
    assert our_warnings == stock_warnings and len(stock_warnings) >= 3
    ours = GeminiLiveLLMService(**kwargs)
    stock = StockService(**kwargs)
    for field in ("model", "voice", "temperature", "language", "max_tokens", "modalities"):
        assert getattr(ours.settings, field) == getattr(stock.settings, field), field


def test_vertex_refuses_an_api_key_as_stock_does() -> None:
    with pytest.raises(ValueError, match="Invalid parameter 'api_key'"):
        GeminiLiveVertexLLMService(location="l", project_id="p", api_key="k")


async def test_vertex_runs_offline_on_the_emulator_with_a_credential_provider() -> None:
    dials = 0

    async def tokens() -> Credential:
        nonlocal dials
        dials += 1
        return Credential("emulator-token")

    async with Emulator(emulator_config("vertex")) as emu:
        service = GeminiLiveVertexLLMService(
            location="us-central1",
            project_id="emulator-project",
            credential_provider=tokens,
            http_options=emu.http_options(),
            settings=GeminiLiveVertexLLMService.Settings(model=MODEL),
            transparent=True,
        )
        assert dials == 0  # nothing is fetched before a dial
        async with Rig([service]) as rig:
            await rig.queue(InputTextRawFrame("hello there"))
            await rig.wait(lambda: rig.count(LLMFullResponseEndFrame) >= 1)
        (session,) = emu.ledger.sessions.values()
    (connection,) = session.connections
    assert connection.api == "vertex"
    assert connection.setup is not None and connection.setup.transparent
    assert dials == 1


def test_vertex_construction_without_credentials_touches_nothing() -> None:
    # The stock service would load and refresh credentials here (network, ADC).
    service = GeminiLiveVertexLLMService(location="us-central1", project_id="p")
    assert service.transport.is_connected is False
