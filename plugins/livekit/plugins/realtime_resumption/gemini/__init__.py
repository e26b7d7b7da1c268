"""The LiveKit plugin's Gemini Live modules: the ``RealtimeModel`` and its ``RealtimeSession``
over ``GeminiLiveTransport``, their options, and the chat context mirrored into Gemini's
turns.

Import them from ``livekit.plugins.realtime_resumption``.
"""
