"""Gemini Live transport over google-genai."""

from realtime_resumption.gemini.config import (
    DEFAULT_MODEL,
    DEFAULT_SETUP_TIMEOUT,
    Credential,
    CredentialProvider,
)
from realtime_resumption.gemini.transport import GeminiLiveTransport

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_SETUP_TIMEOUT",
    "Credential",
    "CredentialProvider",
    "GeminiLiveTransport",
]
