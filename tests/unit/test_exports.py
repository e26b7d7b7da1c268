"""``realtime_resumption`` exports what a user needs, loads it on first use, and is cheap to
import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import realtime_resumption

EXPECTED = {
    "GeminiLiveTransport",
    "SessionResumption",
    "ResumptionOptions",
    "MoveReport",
    "MoveOutcome",
    "MoveReason",
    "HandleKind",
    "OutboxLimits",
    "Emulator",
    "EmulatorConfig",
    "TransportError",
    "NotConnectedError",
    "ConnectError",
    "SessionLostError",
    "ToolCallOrphanedError",
    "UnknownToolCallError",
    "ContentTurn",
    "ToolResult",
    "ReplayItem",
    "SessionUpdate",
    "GenerationSettings",
    "RetryPolicy",
    "SessionStore",
    "MemoryStore",
    "StoreOptions",
    "LeaseHeldError",
}


def test_every_name_a_user_needs_is_exported() -> None:
    assert set(realtime_resumption.__all__) >= EXPECTED
    assert set(realtime_resumption.__all__) <= set(dir(realtime_resumption))


def test_each_export_is_the_object_of_its_home_module() -> None:
    from realtime_resumption import failures, gemini, move_reports, outbox, resumption, transport

    assert realtime_resumption.GeminiLiveTransport is gemini.GeminiLiveTransport
    assert realtime_resumption.OutboxLimits is outbox.OutboxLimits
    assert realtime_resumption.RetryPolicy is failures.RetryPolicy
    assert realtime_resumption.GenerationSettings is transport.GenerationSettings
    assert realtime_resumption.MoveReason is move_reports.MoveReason
    assert realtime_resumption.SessionResumption is resumption.SessionResumption
    assert realtime_resumption.NotConnectedError is transport.NotConnectedError
    for name in realtime_resumption.__all__:
        assert getattr(realtime_resumption, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        realtime_resumption.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_package_loads_neither_the_sdk_nor_the_emulator() -> None:
    code = (
        "import sys, realtime_resumption; "
        "print(sorted(m for m in sys.modules if m.startswith(('google', 'realtime_resumption.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
