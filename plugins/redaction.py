"""Shows secrets (API keys, resumption handles) in logs and reprs without giving them away."""

from __future__ import annotations

_SHOWN = 4


def redact(secret: str | None) -> str:
    """A loggable stand-in for ``secret``: its first few characters and its length.

    ``None`` and the empty string are shown as such, so a log still tells "no handle" apart
    from "a handle"; a short secret shows no characters at all.
    """
    if secret is None:
        return "<none>"
    if not secret:
        return "<empty>"
    if len(secret) <= 2 * _SHOWN:
        return f"<{len(secret)} chars>"
    return f"{secret[:_SHOWN]}…<{len(secret)} chars>"
