"""The LiveKit job's room: the default key of a call kept in a ``SessionStore``."""

from __future__ import annotations


def room_name() -> str:
    """The job's room name: a session's default key in the store. ``ValueError`` outside a
    LiveKit job."""
    from livekit.agents import get_job_context

    try:
        return get_job_context().room.name
    except RuntimeError:
        raise ValueError(
            "a RealtimeModel with a store needs a session_key outside a LiveKit job "
            "(in a job, the room's name is the default)"
        ) from None
