"""Gemini Live transport over google-genai.

What the framework adapters and applications use is exported here; the modules below it are
the transport's own parts (see ARCHITECTURE.md).
"""

from realtime_resumption.failures import RetryPolicy
from realtime_resumption.gemini.live_models import ModelTraits, model_version
from realtime_resumption.gemini.live_options import (
    DEFAULT_MODEL,
    DEFAULT_SETUP_TIMEOUT,
    Credential,
    CredentialProvider,
    LiveOptions,
    StoreOptions,
    sliding_window,
)
from realtime_resumption.gemini.live_transport import GeminiLiveTransport
from realtime_resumption.gemini.rotation import DEFAULT_RETRY_BUDGET
from realtime_resumption.gemini.transport_options import TransportOptions
from realtime_resumption.gemini.watchdog import DEFAULT_RESUME_WATCHDOG
from realtime_resumption.outbox import OutboxLimits

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_RESUME_WATCHDOG",
    "DEFAULT_RETRY_BUDGET",
    "DEFAULT_SETUP_TIMEOUT",
    "Credential",
    "CredentialProvider",
    "GeminiLiveTransport",
    "LiveOptions",
    "ModelTraits",
    "OutboxLimits",
    "RetryPolicy",
    "StoreOptions",
    "TransportOptions",
    "model_version",
    "sliding_window",
]
