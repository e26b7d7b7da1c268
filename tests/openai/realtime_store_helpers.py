"""What the OpenAI store tests and their worker process share: the call's configuration, the
store's timing, the question the killed worker leaves unfinished, and a real Redis server."""

from __future__ import annotations

from realtime_resumption.openai import FunctionTool, InputTranscription, SessionConfig
from realtime_resumption.store import StoreOptions

KEY = "oai-call-7"
CONFIG = SessionConfig(
    instructions="Answer briefly.",
    tools=(FunctionTool("lookup", "Look the time up."),),
    transcription=InputTranscription("whisper-1"),
)
OPTIONS = StoreOptions(write_interval=0.25, lease_ttl=1.0, lease_wait=3.0)
ASKED = (40, 10, ("what", "time"))
"""The start of a question the killed worker says and never finishes: its first chunk's
number, its chunks, their words."""
FINISHED = (50, 5, ("is", "it"))
"""The rest of it, said to the process that took the call over."""
WAIT = 20.0
"""Seconds a step may take on a loaded machine (the emulator runs at 1/100 time)."""
