"""The members of pipecat-ai's stock ``OpenAIRealtimeLLMService`` the drop-ins build on.

The drop-ins are the stock class with its wire replaced: they override some of its private
methods, call others and read and set its private state (pipecat-ai 1.14). A pipecat-ai that
renamed one would not fail loudly: an override no longer called, state no longer read, a call
that quietly stops moving. So the drop-ins check these members where they are first used (the
methods when the module is imported, the state when a service is built) and refuse, naming what
is missing, rather than run on internals they were not made for.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Final

BUILT_ON: Final = "1.14"
"""The pipecat-ai release whose internals the drop-ins were written against."""

STOCK_METHODS: Final = (
    # Overridden: the wire goes to the transport.
    "_connect",
    "_disconnect",
    "send_client_event",
    "_create_response",
    "_handle_interruption",
    "_send_user_audio",
    "_truncate_current_audio_response",
    "_handle_bot_stopped_speaking",
    # Called as stock does.
    "_auth_headers",
    "_log_llm_conversation_setup",
    "_send_session_update",
    "_strip_unsupported_reasoning",
)
STOCK_STATE: Final = (
    "_api_session_ready",
    "_completed_tool_calls",
    "_context",
    "_llm_needs_conversation_setup",
    "_open_function_calls",
    "_response_active",
    "_response_create_owed",
    "_results_awaiting_response",
    "_run_llm_when_api_session_ready",
    "_settings",
)


class StockServiceChangedError(ImportError):
    """The installed pipecat-ai's stock service lacks members the drop-ins build on."""


def missing_methods(stock: type) -> list[str]:
    """The methods of :data:`STOCK_METHODS` that ``stock`` does not have."""
    return [name for name in STOCK_METHODS if not callable(getattr(stock, name, None))]


def missing_state(service: object) -> list[str]:
    """The attributes of :data:`STOCK_STATE` a built stock service lacks."""
    return [name for name in STOCK_STATE if not hasattr(service, name)]


def refuse_if_missing(missing: list[str]) -> None:
    """Raise :class:`StockServiceChangedError` naming ``missing``, if any."""
    if not missing:
        return
    try:
        installed = version("pipecat-ai")
    except PackageNotFoundError:
        installed = "unknown"
    raise StockServiceChangedError(
        f"realtime_resumption.pipecat.openai is built on pipecat-ai {BUILT_ON}'s "
        f"OpenAIRealtimeLLMService; the installed pipecat-ai {installed} has no "
        f"{', '.join(missing)}: install pipecat-ai {BUILT_ON}.x, or a realtime-resumption "
        "made for this release"
    )
