"""LiveKit Agents plugin: a Gemini Live ``RealtimeModel`` that survives connection rotation.

A drop-in for ``livekit.plugins.google.realtime.RealtimeModel``::

    from livekit.plugins import realtime_resumption

    session = AgentSession(llm=realtime_resumption.RealtimeModel(voice="Puck"))

Sessions move to a new connection by themselves at a ``goAway``, after a drop, and when
instructions or tools change; each move is reported by a ``session_moved`` event carrying the
``MoveReport`` and followed by ``session_reconnected``; its figures also reach
``metrics_collected`` (``SessionMoveMetrics``). With LiveKit's tracer provider set
(``livekit.agents.telemetry.set_tracer_provider``), every move, connection and answer is a
span under the session's.

OpenAI Realtime (the extra ``[openai]``): ``realtime_resumption.openai.RealtimeModel`` is a
drop-in for ``livekit.plugins.openai.realtime.RealtimeModel``, Azure included
(``RealtimeModel.with_azure``).
"""

from livekit.agents import Plugin

from .events import SessionMovedEvent
from .gemini.model import RealtimeModel
from .gemini.session import RealtimeSession
from .log import logger
from .metrics import SessionMoveMetrics
from .version import __version__

__all__ = [
    "RealtimeModel",
    "RealtimeSession",
    "SessionMoveMetrics",
    "SessionMovedEvent",
    "__version__",
]


def __getattr__(name: str) -> object:
    # The OpenAI modules need the openai SDK (an extra): imported on first use.
    if name == "openai":
        import importlib

        return importlib.import_module(f"{__name__}.openai")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RealtimeResumptionPlugin(Plugin):
    """Registers the plugin with LiveKit Agents."""

    def __init__(self) -> None:
        super().__init__(__name__, __version__, __package__, logger)


Plugin.register_plugin(RealtimeResumptionPlugin())
