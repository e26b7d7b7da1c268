"""Keeps realtime voice-agent sessions alive across a provider's connection rotation.

Everything a user needs is importable from here::

    from realtime_resumption import GeminiLiveTransport, OutboxLimits, ResumptionOptions

The names load on first use, so ``import realtime_resumption`` stays cheap (google-genai and
the emulator are imported only when one of their names is).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from realtime_resumption.failures import RetryPolicy
    from realtime_resumption.gemini import (
        Credential,
        CredentialProvider,
        GeminiLiveTransport,
    )
    from realtime_resumption.history import HistoryLimits
    from realtime_resumption.move_reports import (
        HandleKind,
        MoveMode,
        MoveOutcome,
        MoveReason,
        MoveReport,
    )
    from realtime_resumption.outbox import OutboxLimits
    from realtime_resumption.redaction import Secret, redact
    from realtime_resumption.resumption import (
        ResumptionOptions,
        SessionResumption,
    )
    from realtime_resumption.session_record import RecordError
    from realtime_resumption.store import (
        LeaseHeldError,
        MemoryStore,
        SessionStore,
        StoreError,
        StoreOptions,
        hand_over_on,
    )
    from realtime_resumption.telemetry import Telemetry
    from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
    from realtime_resumption.transport import (
        CancelResponseOptions,
        ConnectError,
        ConnectFailure,
        ContentTurn,
        DialAbandonedError,
        GenerationEndReason,
        GenerationSettings,
        LLMTransport,
        MessageTooLargeError,
        NotConnectedError,
        ReconnectState,
        ReplayItem,
        RetainedUserTurn,
        SendQueueFullError,
        SessionLostError,
        SessionUpdate,
        SetupRefusedError,
        ToolCall,
        ToolCallOrphanedError,
        ToolResult,
        TransportError,
        TransportErrorEvent,
        UnknownToolCallError,
    )

_EXPORTS: Final[dict[str, str]] = {
    # the transport and its settings
    "GeminiLiveTransport": "realtime_resumption.gemini",
    "Credential": "realtime_resumption.gemini",
    "CredentialProvider": "realtime_resumption.gemini",
    "OutboxLimits": "realtime_resumption.outbox",
    "HistoryLimits": "realtime_resumption.history",
    "RetryPolicy": "realtime_resumption.failures",
    "ResumptionOptions": "realtime_resumption.resumption",
    "SessionResumption": "realtime_resumption.resumption",
    # calls that survive the worker (RedisStore: realtime_resumption.redis_store)
    "SessionStore": "realtime_resumption.store",
    "MemoryStore": "realtime_resumption.store",
    "StoreOptions": "realtime_resumption.store",
    "StoreError": "realtime_resumption.store",
    "LeaseHeldError": "realtime_resumption.store",
    "hand_over_on": "realtime_resumption.store",
    "RecordError": "realtime_resumption.session_record",
    # moves
    "MoveReport": "realtime_resumption.move_reports",
    "MoveOutcome": "realtime_resumption.move_reports",
    "MoveReason": "realtime_resumption.move_reports",
    "HandleKind": "realtime_resumption.move_reports",
    "MoveMode": "realtime_resumption.move_reports",
    # spans and metrics (the OpenTelemetry API)
    "Telemetry": "realtime_resumption.telemetry",
    # what the transport takes and reports
    "LLMTransport": "realtime_resumption.transport",
    "ContentTurn": "realtime_resumption.transport",
    "ReplayItem": "realtime_resumption.transport",
    "RetainedUserTurn": "realtime_resumption.transport",
    "ReconnectState": "realtime_resumption.transport",
    "SessionUpdate": "realtime_resumption.transport",
    "GenerationSettings": "realtime_resumption.transport",
    "ToolCall": "realtime_resumption.transport",
    "ToolResult": "realtime_resumption.transport",
    "CancelResponseOptions": "realtime_resumption.transport",
    "GenerationEndReason": "realtime_resumption.transport",
    "TransportErrorEvent": "realtime_resumption.transport",
    "ConnectFailure": "realtime_resumption.transport",
    # errors
    "TransportError": "realtime_resumption.transport",
    "NotConnectedError": "realtime_resumption.transport",
    "MessageTooLargeError": "realtime_resumption.transport",
    "SendQueueFullError": "realtime_resumption.transport",
    "UnknownToolCallError": "realtime_resumption.transport",
    "ToolCallOrphanedError": "realtime_resumption.transport",
    "SessionLostError": "realtime_resumption.transport",
    "ConnectError": "realtime_resumption.transport",
    "SetupRefusedError": "realtime_resumption.transport",
    "DialAbandonedError": "realtime_resumption.transport",
    # secrets
    "Secret": "realtime_resumption.redaction",
    "redact": "realtime_resumption.redaction",
    # the emulator, for users' own tests
    "Emulator": "realtime_resumption.testing.emulator",
    "EmulatorConfig": "realtime_resumption.testing.emulator",
}

__all__ = [
    "CancelResponseOptions",
    "ConnectError",
    "ConnectFailure",
    "ContentTurn",
    "Credential",
    "CredentialProvider",
    "DialAbandonedError",
    "Emulator",
    "EmulatorConfig",
    "GeminiLiveTransport",
    "GenerationEndReason",
    "GenerationSettings",
    "HandleKind",
    "HistoryLimits",
    "LLMTransport",
    "LeaseHeldError",
    "MemoryStore",
    "MessageTooLargeError",
    "MoveMode",
    "MoveOutcome",
    "MoveReason",
    "MoveReport",
    "NotConnectedError",
    "OutboxLimits",
    "ReconnectState",
    "RecordError",
    "ReplayItem",
    "ResumptionOptions",
    "RetainedUserTurn",
    "RetryPolicy",
    "Secret",
    "SendQueueFullError",
    "SessionLostError",
    "SessionResumption",
    "SessionStore",
    "SessionUpdate",
    "SetupRefusedError",
    "StoreError",
    "StoreOptions",
    "Telemetry",
    "ToolCall",
    "ToolCallOrphanedError",
    "ToolResult",
    "TransportError",
    "TransportErrorEvent",
    "UnknownToolCallError",
    "hand_over_on",
    "redact",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
