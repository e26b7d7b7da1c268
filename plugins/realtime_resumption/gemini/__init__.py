"""Gemini Live transport over google-genai."""

from realtime_resumption.gemini.live_options import (
    DEFAULT_MODEL,
    DEFAULT_SETUP_TIMEOUT,
    Credential,
    CredentialProvider,
)
from realtime_resumption.gemini.live_transport import GeminiLiveTransport

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_SETUP_TIMEOUT",
    "Credential",
    "CredentialProvider",
    "GeminiLiveTransport",
]
