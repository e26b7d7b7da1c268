"""The LiveKit plugin's OpenAI Realtime modules: the ``RealtimeModel`` (and its Azure
constructor, ``RealtimeModel.with_azure``) and its ``RealtimeSession`` over
``OpenAIRealtimeTransport``.

    from livekit.plugins import realtime_resumption

    session = AgentSession(llm=realtime_resumption.openai.RealtimeModel(voice="marin"))
"""

from .openai_model import RealtimeModel
from .openai_session import RealtimeSession

__all__ = ["RealtimeModel", "RealtimeSession"]
