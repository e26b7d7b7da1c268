"""OpenAI Realtime: the pure pieces a transport over the ``openai`` SDK stands on.

``realtime_server_events`` reads the server's events into typed values, ``session_config``
holds a session's configuration and renders its ``session.update``, ``conversation_state``
follows one session's conversation and input buffer exactly, and ``conversation_seed`` builds
the ``conversation.item.create`` events that give a new session that conversation. None of
them does I/O.
"""
