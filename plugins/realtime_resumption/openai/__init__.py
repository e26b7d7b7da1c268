"""OpenAI Realtime: a transport over the ``openai`` SDK (extra ``[openai]``), and the pure pieces
it stands on.

``realtime_server_events`` reads the server's events into typed values, ``session_config``
holds a session's configuration and renders its ``session.update``, ``conversation_state``
follows one session's conversation and input buffer exactly, and ``conversation_seed`` builds
the ``conversation.item.create`` events that give a new session that conversation. None of
them does I/O. ``realtime_connection`` is one session over the SDK, and
``realtime_transport`` the transport the frameworks use; ``realtime_record`` is what a call
keeps in a session store, and ``realtime_persistence`` keeps it there (the core's
``record_keeper``).
"""

try:
    import openai as _openai  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "realtime_resumption.openai needs the openai SDK's realtime client: "
        "pip install 'realtime-resumption[openai]'"
    ) from exc

from realtime_resumption.openai.realtime_options import (
    AZURE_CAP,
    DEFAULT_MODEL,
    OPENAI_CAP,
    OpenAIRealtimeOptions,
)
from realtime_resumption.openai.realtime_transport import OpenAIRealtimeTransport
from realtime_resumption.openai.session_config import (
    AudioFormat,
    FunctionTool,
    InputTranscription,
    SemanticVad,
    ServerVad,
    SessionConfig,
)

__all__ = [
    "AZURE_CAP",
    "DEFAULT_MODEL",
    "OPENAI_CAP",
    "AudioFormat",
    "FunctionTool",
    "InputTranscription",
    "OpenAIRealtimeOptions",
    "OpenAIRealtimeTransport",
    "SemanticVad",
    "ServerVad",
    "SessionConfig",
]
