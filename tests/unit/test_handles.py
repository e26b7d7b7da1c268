"""The handle book: one text per handle, kept while a part holds its reference."""

from __future__ import annotations

import gc

import pytest

from realtime_resumption.handles import HandleBook, HandleRef
from realtime_resumption.redaction import redact

TEXT = "handle-0123456789abcdef"


def test_a_reference_gives_the_text_and_never_shows_it() -> None:
    book = HandleBook()
    ref = book.enter(TEXT)
    assert book.text(ref) == TEXT
    assert TEXT not in repr(ref) and TEXT not in redact(ref) and TEXT not in repr(book)
    assert redact(ref) == repr(ref) == f"HandleRef({ref.number})"


def test_a_repeated_handle_has_one_reference() -> None:
    book = HandleBook()
    first = book.enter(TEXT)
    assert book.enter(TEXT) is first
    other = book.enter(TEXT + "-2")
    assert other is not first and other.number > first.number
    assert {first: 1, other: 2}[book.enter(TEXT)] == 1


def test_the_text_lives_as_long_as_a_reference() -> None:
    book = HandleBook()
    kept = book.enter(TEXT)
    dropped: HandleRef | None = book.enter("another-handle-0123456789")
    assert len(book) == 2
    del dropped
    gc.collect()
    assert len(book) == 1
    assert book.text(kept) == TEXT
    # A handle met again after every part let it go is a new reference.
    assert book.enter("another-handle-0123456789").number == 3


def test_an_empty_handle_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        HandleBook().enter("")
