"""The drop-ins refuse a pipecat-ai whose stock OpenAI Realtime service lacks the members they
build on, naming them, instead of running on internals they were not made for."""

from __future__ import annotations

import pytest
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService as StockService

from realtime_resumption.pipecat.openai import OpenAIRealtimeLLMService
from realtime_resumption.pipecat.openai.stock_members import (
    STOCK_METHODS,
    STOCK_STATE,
    StockServiceChangedError,
    missing_methods,
    missing_state,
    refuse_if_missing,
)


def test_the_installed_stock_service_has_every_member_the_drop_ins_build_on() -> None:
    assert missing_methods(StockService) == []
    assert missing_state(OpenAIRealtimeLLMService(api_key="sk-test")) == []


def test_every_stock_method_the_drop_in_overrides_is_checked() -> None:
    # An override of a method stock renamed would never be called: each is in the list.
    overridden = {
        name
        for name, value in vars(OpenAIRealtimeLLMService).items()
        if callable(value) and not name.startswith("__") and hasattr(StockService, name)
    }
    assert overridden <= set(STOCK_METHODS)


def test_a_stock_service_that_renamed_a_member_is_refused_by_name() -> None:
    class Renamed:
        def _connect(self) -> None: ...

    missing = missing_methods(Renamed)
    assert "_connect" not in missing and "send_client_event" in missing
    with pytest.raises(StockServiceChangedError, match=r"has no _disconnect, send_client_event"):
        refuse_if_missing(missing)
    assert missing_state(Renamed()) == list(STOCK_STATE)


def test_nothing_missing_is_no_error() -> None:
    refuse_if_missing([])
