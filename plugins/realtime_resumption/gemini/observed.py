"""The framework's callbacks as the transport's parts call them, with an observer in front:
the transport's one seam for its telemetry.

The framework sets the transport's ``on_*`` attributes; the parts (receiver, rotation,
switchover, ...) call them through the session's ``callbacks``. With an observer, ``callbacks``
is an :class:`Observed` object: for each ``on_*`` method of the observer it holds one composed
callable, made once, that calls the observer's method and then the framework's callback, read
from the transport at each call (so a framework may set it at any time); every other name reads
the transport. The transport's attributes themselves stay what the framework set (None by
default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger


class Observed:
    """``owner`` as its parts read it, each ``on_*`` callback that ``observer`` has a method
    for preceded by that method; see the module documentation."""

    __slots__ = ("_hooked", "_owner")

    def __init__(self, owner: object, observer: object) -> None:
        self._owner = owner
        kind = type(observer)
        self._hooked: dict[str, _Composed] = {
            name: _Composed(getattr(observer, name), owner, name)
            for name in dir(kind)
            if name.startswith("on_") and callable(getattr(kind, name))
        }

    def __getattr__(self, name: str) -> Any:
        # Every name but the two slots: the composed callbacks, else the transport's own.
        hooked = self._hooked.get(name)
        return hooked if hooked is not None else getattr(self._owner, name)

    def __repr__(self) -> str:
        return repr(self._owner)

    def __str__(self) -> str:
        return str(self._owner)


def observed(owner: object, observer: object) -> Any:
    """``owner`` with ``observer``'s hooks in front of its callbacks (:class:`Observed`)."""
    return Observed(owner, observer)


class _Composed:
    """The observer's hook, then the framework's callback (if any). An observer that raises
    is logged; the framework's callback still runs."""

    __slots__ = ("_hook", "_name", "_owner")

    def __init__(self, hook: Callable[..., None], owner: object, name: str) -> None:
        self._hook = hook
        self._owner = owner
        self._name = name

    def __call__(self, *args: Any) -> None:
        try:
            self._hook(*args)
        except Exception:
            logger.exception("an observer of the transport raised; ignored")
        callback: Callable[..., None] | None = getattr(self._owner, self._name)
        if callback is not None:
            callback(*args)
