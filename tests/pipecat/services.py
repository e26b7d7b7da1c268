"""The two services under comparison, built the same way on one emulator."""

from __future__ import annotations

from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService as StockService
from pipecat.services.llm_service import FunctionCallParams

from realtime_resumption.pipecat import GeminiLiveLLMService
from realtime_resumption.testing.emulator import Emulator

from .rig import FAST, MODEL

LOOKUP = ToolsSchema(
    standard_tools=[
        FunctionSchema(name="lookup", description="Look a flight up.", properties={}, required=[])
    ]
)


async def answer_lookup(params: FunctionCallParams) -> None:
    await params.result_callback({"flight": "LH 123"})


def _build(cls: Any, emu: Emulator, tools: Any, options: dict[str, Any]) -> Any:
    """``tools``: True for ``lookup`` (registered), False for none, else the tools as given."""
    service = cls(
        api_key="emulator-key",
        http_options=emu.http_options(),
        settings=cls.Settings(model=MODEL, **options.pop("settings", {})),
        tools=LOOKUP if tools is True else None if tools is False else tools,
        **options,
    )
    if tools is True:
        service.register_function("lookup", answer_lookup)
    return service


def ours(emu: Emulator, *, tools: Any = False, **options: Any) -> GeminiLiveLLMService:
    """Our service on ``emu``, with fast retries."""
    options.setdefault("resumption", FAST)
    service: GeminiLiveLLMService = _build(GeminiLiveLLMService, emu, tools, options)
    return service


def stock(emu: Emulator, *, tools: Any = False, **options: Any) -> StockService:
    """The stock service on ``emu``."""
    service: StockService = _build(StockService, emu, tools, options)
    return service
