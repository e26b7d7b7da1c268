"""The framework's callbacks as the transport's parts call them, with an observer in front:
the transport's one seam for its telemetry.

The framework sets the transport's ``on_*`` attributes; the parts (receiver, rotation,
handover, ...) call them through the session's ``callbacks``. With an observer, ``callbacks``
is an :func:`observed` view of the transport: reading one of the observer's ``on_*`` names
gives a callable that calls the observer's method first, then the framework's callback (read
at the call, so a framework may set it at any time); every other name reads the transport's
own attributes. The transport's attributes themselves stay what the framework set (None by
default).

The view shares the transport's instance dictionary, so reading a callback the observer does
not watch (``on_audio_output``, for every chunk) costs what reading it on the transport does;
the watched names are properties of the view's class, which take precedence over that
dictionary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger


class _View:
    __slots__ = ("__dict__", "_observer", "_owner")

    def __init__(self, owner: object, observer: object) -> None:
        self._owner = owner
        self._observer = observer
        # The same dictionary, not a copy: what the framework sets later shows here at once.
        self.__dict__ = owner.__dict__

    def __getattr__(self, name: str) -> Any:
        # Only names the shared dictionary lacks: the transport's methods and properties.
        return getattr(self._owner, name)

    def __repr__(self) -> str:
        return repr(self._owner)

    def __str__(self) -> str:
        return str(self._owner)


def observed(owner: object, observer: object) -> Any:
    """``owner`` as its parts read it, each ``on_*`` callback that ``observer`` has a method
    for preceded by that method; see the module documentation."""
    kind = type(observer)
    view = _VIEWS.get(kind)
    if view is None:
        # One view class per kind of observer: its ``on_*`` methods become properties.
        names = [n for n in dir(kind) if n.startswith("on_") and callable(getattr(kind, n))]
        watched = {name: property(_watched(name)) for name in names}
        view = _VIEWS[kind] = type(
            f"Observed{kind.__name__}", (_View,), {"__slots__": (), **watched}
        )
    return view(owner, observer)


_VIEWS: dict[type, type[_View]] = {}


def _watched(name: str) -> Callable[[_View], _Both]:
    def read(view: _View) -> _Both:
        return _Both(getattr(view._observer, name), view.__dict__.get(name))

    return read


class _Both:
    """The observer's hook, then the framework's callback (if any). An observer that raises
    is logged; the framework's callback still runs."""

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
