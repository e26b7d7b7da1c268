"""The process's memory of endpoints that refuse a resume while the incumbent is open."""

from __future__ import annotations

from realtime_resumption.gemini.endpoints import EndpointModes


def test_an_endpoint_is_remembered_for_a_while_then_probed_again() -> None:
    modes = EndpointModes(remember_for=60.0)
    assert not modes.break_first("gemini:example.test", now=0.0)
    modes.refused_while_open("gemini:example.test", now=0.0)
    assert modes.break_first("gemini:example.test", now=59.0)
    assert not modes.break_first("vertex:example.test", now=59.0), "per endpoint"
    assert not modes.break_first("gemini:example.test", now=61.0), "forgotten after a while"


def test_an_unknown_endpoint_is_never_break_first() -> None:
    modes = EndpointModes()
    modes.refused_while_open(None)
    assert not modes.break_first(None)


def test_by_default_an_endpoint_is_remembered_for_an_hour() -> None:
    """The README's figure (Limits: "the process remembers the endpoint for an hour")."""
    modes = EndpointModes()
    modes.refused_while_open("gemini:example.test", now=0.0)
    assert modes.break_first("gemini:example.test", now=3599.0)
    assert not modes.break_first("gemini:example.test", now=3601.0)
