"""``TransportOptions``: checked where they are built, kept out of logs, taken whole by the
transport."""

from __future__ import annotations

import dataclasses

import pytest

from realtime_resumption.failures import RetryPolicy
from realtime_resumption.gemini import GeminiLiveTransport, TransportOptions


def test_options_are_checked_where_they_are_built() -> None:
    with pytest.raises(ValueError, match="transparent session resumption"):
        TransportOptions(api_key="key-0123456789", transparent=True)


def test_the_setup_is_derived_once_and_secrets_stay_out_of_the_repr() -> None:
    options = TransportOptions(
        api_key="key-0123456789", voice="Puck", tools=[{"name": "f"}], session_key="call-42"
    )
    assert options.setup.voice == "Puck" and options.setup.declares_functions
    assert not options.uses_vertex
    assert "key-0123456789" not in repr(options) and "call-42" not in repr(options)
    changed = dataclasses.replace(options, voice="Kore")
    assert changed.setup.voice == "Kore"


def test_a_budget_is_a_retry_policy() -> None:
    assert TransportOptions(api_key="k", retry_budget=3).retry_policy == RetryPolicy(attempts=3)
    policy = RetryPolicy(attempts=5)
    assert TransportOptions(api_key="k", retry_budget=policy).retry_policy is policy


def test_the_transport_takes_options_or_keywords_not_both() -> None:
    options = TransportOptions(api_key="key-0123456789", voice="Puck")
    transport = GeminiLiveTransport(options)
    assert transport.setup == options.setup
    assert GeminiLiveTransport(api_key="key-0123456789", voice="Puck").setup == options.setup
    with pytest.raises(TypeError, match="not both"):
        GeminiLiveTransport(options, voice="Kore")  # type: ignore[call-arg]
