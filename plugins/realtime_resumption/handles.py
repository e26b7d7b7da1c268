"""The one record of a session's resumption handles.

A resumption handle is the provider's name for a snapshot of the server session, and a secret.
A transport keeps each handle's text in one place, a :class:`HandleBook`. Every other part
that must know a handle (the resumption helper, the move machine, the outbox's resumption
points, the tool-call tracker) holds a :class:`HandleRef`, which carries a number and never
the text; the part that needs the text (the dial, the transport's ``resumption_handle``, the
store) asks the book. So the parts cannot disagree about a handle's text, and no repr, log or
error of theirs can show it.

A text stays in the book as long as some part holds its reference: each part bounds what it
keeps (the outbox its newest points, the tracker its snapshots, the machine the handles the
provider refused), and the book follows them, with no bound of its own to keep in step.
"""

from __future__ import annotations

import itertools
import weakref


class HandleRef:
    """A handle, as the parts of a session hold it: a number, one object per handle (two
    references to the same handle are the same object). Its text is the book's."""

    __slots__ = ("__weakref__", "number")

    def __init__(self, number: int) -> None:
        self.number = number

    def __repr__(self) -> str:
        return f"HandleRef({self.number})"


class HandleBook:
    """The texts of a session's handles, each under its :class:`HandleRef`; see the module
    documentation."""

    def __init__(self) -> None:
        self._texts: weakref.WeakKeyDictionary[HandleRef, str] = weakref.WeakKeyDictionary()
        self._refs: weakref.WeakValueDictionary[str, HandleRef] = weakref.WeakValueDictionary()
        self._numbers = itertools.count(1)

    def enter(self, text: str) -> HandleRef:
        """The reference of the handle ``text``: the one already given out when a part still
        holds it (the provider may repeat a handle), else a new one."""
        if not text:
            raise ValueError("an empty handle resumes nothing")
        ref = self._refs.get(text)
        if ref is None:
            ref = HandleRef(next(self._numbers))
            self._texts[ref] = text
            self._refs[text] = ref
        return ref

    def text(self, ref: HandleRef) -> str:
        """The text of ``ref``'s handle (for the wire, the transport's API and the store)."""
        return self._texts[ref]

    def __len__(self) -> int:
        """How many handles some part still holds."""
        return len(self._texts)

    def __repr__(self) -> str:
        return f"HandleBook(handles={len(self._texts)})"
