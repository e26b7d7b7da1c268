"""The framework's callbacks as the transport's parts call them, with an observer in front:
the transport's one seam for its telemetry.

The framework sets the transport's ``on_*`` attributes; the parts (receiver, rotation,
handover, ...) call them through the session's ``callbacks``. With an observer, ``callbacks``
is an :class:`ObservedCallbacks` over the transport: reading one of the observer's ``on_*``
names gives a callable that calls the observer's method first, then the framework's callback
(read at the call, so a framework may set it at any time); every other name is the
transport's own. The transport's attributes themselves stay what the framework set (None by
default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger


class ObservedCallbacks:
    """``owner``'s attributes, each ``on_*`` callback that ``observer`` also has preceded by
    the observer's method; see the module documentation. An observer that raises is logged;
    the framework's callback still runs."""

    def __init__(self, owner: object, observer: object) -> None:
        self._owner = owner
        self._taps: dict[str, Callable[..., None]] = {
            name: getattr(observer, name)
            for name in dir(type(observer))
            if name.startswith("on_") and callable(getattr(observer, name))
        }

    def __getattr__(self, name: str) -> Any:
        callback = getattr(self._owner, name)
        tap = self._taps.get(name)
        if tap is None:
            return callback
        return _Both(tap, callback)

    def __repr__(self) -> str:
        return repr(self._owner)

    def __str__(self) -> str:
        return str(self._owner)


class _Both:
    __slots__ = ("_callback", "_tap")

    def __init__(self, tap: Callable[..., None], callback: Callable[..., None] | None) -> None:
        self._tap = tap
        self._callback = callback

    def __call__(self, *args: Any) -> None:
        try:
            self._tap(*args)
        except Exception:
            logger.exception("an observer of the transport raised; ignored")
        if self._callback is not None:
            self._callback(*args)
