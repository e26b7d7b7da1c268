"""Reads protobuf ``Duration`` strings, the form Gemini Live gives ``goAway.timeLeft`` in."""

from __future__ import annotations

import re

MAX_DURATION = 86_400.0
"""The longest duration :func:`parse_duration` accepts, in seconds (one day).

A connection lives minutes and its closing notice is under a minute in practice (one report of
300 s); a figure beyond a day cannot be a real notice, so it is read as no figure at all.
"""

# Protobuf's JSON form: whole seconds, an optional fraction of at most nine digits (nanosecond
# precision), then "s". ASCII digits only; a sign, exponent or blank makes it malformed. The
# length cap keeps int-sized garbage from reaching float().
_DURATION = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?s")


def parse_duration(value: str | None) -> float | None:
    """Seconds in a protobuf Duration string such as ``"50s"``, ``"0.500s"``, ``"1.000340012s"``.

    Returns None for anything else: None, a malformed string, a negative duration, or one longer
    than :data:`MAX_DURATION`. Callers treat None as "no figure given".
    """
    if not isinstance(value, str) or _DURATION.fullmatch(value) is None:
        return None
    seconds = float(value[:-1])
    return seconds if seconds <= MAX_DURATION else None
