"""parse_duration: protobuf Duration strings to seconds, None for anything else."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime_resumption.duration import MAX_DURATION, parse_duration

FAST = settings(max_examples=100, deadline=None)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("50s", 50.0),
        ("60s", 60.0),
        ("300s", 300.0),
        ("0s", 0.0),
        ("0.500s", 0.5),
        ("1.000340012s", 1.000340012),
        ("1.5s", 1.5),
        ("0.000000001s", 1e-9),
        ("86400s", 86_400.0),
        ("86400.000000000s", 86_400.0),
        ("007s", 7.0),
    ],
)
def test_parses_protobuf_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "s",
        "50",
        "50 s",
        " 50s",
        "50s ",
        "50S",
        "50ms",
        "-1s",
        "-0.5s",
        "+1s",
        "1.s",
        ".5s",
        "1.0000000001s",  # ten fractional digits: finer than a nanosecond
        "5e1s",
        "NaNs",
        "nans",
        "infs",
        "Infinitys",
        "0x10s",
        "1_000s",
        "1,5s",
        "١٢s",  # non-ASCII digits
        "86400.000000001s",
        "86401s",
        "999999999999s",
        "9" * 5000 + "s",
        "{'seconds': 50}",
    ],
)
def test_rejects_anything_else(text: str | None) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize("value", [50, 50.0, b"50s", ["50s"]])
def test_rejects_values_that_are_not_strings(value: object) -> None:
    assert parse_duration(value) is None  # type: ignore[arg-type]


def test_upper_bound_is_a_day() -> None:
    assert MAX_DURATION == 86_400.0


@FAST
@given(
    seconds=st.integers(min_value=0, max_value=int(MAX_DURATION) - 1),
    nanos=st.integers(min_value=0, max_value=999_999_999),
    digits=st.sampled_from([3, 6, 9]),
)
def test_round_trips_canonical_forms(seconds: int, nanos: int, digits: int) -> None:
    fraction = f"{nanos:09d}"[:digits]
    parsed = parse_duration(f"{seconds}.{fraction}s")
    assert parsed is not None
    assert parsed == pytest.approx(seconds + int(fraction) / 10**digits, abs=1e-9)
    assert parse_duration(f"{seconds}s") == seconds


@FAST
@given(st.integers(min_value=int(MAX_DURATION) + 1, max_value=10**12 - 1))
def test_rejects_beyond_the_bound(seconds: int) -> None:
    assert parse_duration(f"{seconds}s") is None


@FAST
@given(st.floats(min_value=1e-9, max_value=1e6, allow_nan=False))
def test_rejects_negative_durations(seconds: float) -> None:
    assert parse_duration(f"-{seconds:.9f}s") is None


@FAST
@given(st.text(max_size=30))
def test_any_text_gives_none_or_a_finite_duration_within_bounds(text: str) -> None:
    parsed = parse_duration(text)
    if parsed is not None:
        assert math.isfinite(parsed)
        assert 0.0 <= parsed <= MAX_DURATION
        assert text.endswith("s")


@FAST
@given(st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,9})?s\Z"))
def test_every_well_formed_duration_within_bounds_parses(text: str) -> None:
    parsed = parse_duration(text)
    assert parsed == pytest.approx(float(text[:-1]))
