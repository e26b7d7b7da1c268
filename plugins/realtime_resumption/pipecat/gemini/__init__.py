"""The Pipecat services' Gemini Live modules: the services over ``GeminiLiveTransport``, what
they write downstream, and Pipecat's Gemini settings read into the transport's options.

Import the services from ``realtime_resumption.pipecat``.
"""
