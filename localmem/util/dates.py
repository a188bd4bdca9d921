"""Relative time expressions resolved to absolute dates, from the session's date.

"I went there yesterday" said on 8 May 2023 is about 7 May 2023; a question asks
"when did she go?" and the answer is a date, not "yesterday". Rules, not a model: they
are exact where they fire and silent where a phrase is vague ("recently", "a while
ago"). Pure functions; the reference time is passed in.

Each hit keeps the character span of the phrase, so the resulting date cue is grounded
in the turn like any other cue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}


@dataclass(frozen=True)
class DateRef:
    start: int  # span of the phrase in the text
    end: int
    phrase: str
    label: str  # "7 May 2023", "the week of 1 May 2023", "April 2023", "2022"


def _day(d: date) -> str:
    return f"{d.day} {d:%B %Y}"


def _week(d: date) -> str:
    monday = d - timedelta(days=d.weekday())
    return f"the week of {_day(monday)}"


def _month(year: int, month: int) -> str:
    return f"{date(year, month, 1):%B %Y}"


def _shift_month(d: date, n: int) -> tuple[int, int]:
    m = d.month - 1 + n
    return d.year + m // 12, m % 12 + 1


_NUM = "|".join(_NUMBERS) + r"|\d+"
_PATTERN = re.compile(
    r"\b(?:"
    r"(?P<yesterday>yesterday)"
    r"|(?P<today>today|tonight|this morning|this afternoon|this evening)"
    r"|(?P<tomorrow>tomorrow)"
    r"|(?P<lastnight>last night)"
    r"|(?P<ago>(?P<n>" + _NUM + r")\s+(?P<unit>day|week|month|year)s?\s+ago)"
    r"|(?P<rel>last|next|this)\s+(?P<what>week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")"
    r")\b",
    re.IGNORECASE,
)


def resolve(text: str, when: str | None) -> list[DateRef]:
    """Every relative time phrase of ``text`` with its absolute date, given the ISO
    time ``when`` the text was said; nothing when ``when`` is unknown."""
    if not when:
        return []
    try:
        ref = datetime.fromisoformat(when).date()
    except ValueError:
        return []
    out: list[DateRef] = []
    for m in _PATTERN.finditer(text):
        label = _label(m, ref)
        if label:
            out.append(DateRef(m.start(), m.end(), m.group(0), label))
    return out


def _label(m: re.Match[str], d: date) -> str | None:
    if m.group("yesterday") or m.group("lastnight"):
        return _day(d - timedelta(days=1))
    if m.group("today"):
        return _day(d)
    if m.group("tomorrow"):
        return _day(d + timedelta(days=1))
    if m.group("ago"):
        raw = m.group("n").lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[raw]
        unit = m.group("unit").lower()
        if unit == "day":
            return _day(d - timedelta(days=n))
        if unit == "week":
            return _week(d - timedelta(weeks=n))
        if unit == "month":
            return _month(*_shift_month(d, -n))
        return str(d.year - n)
    rel, what = m.group("rel").lower(), m.group("what").lower()
    step = {"last": -1, "next": 1, "this": 0}[rel]
    if what == "week":
        return _week(d + timedelta(weeks=step))
    if what == "weekend":
        saturday = d + timedelta(days=(5 - d.weekday()) % 7)  # this (coming) Saturday
        if rel == "last":
            saturday = d - timedelta(days=(d.weekday() - 5) % 7 or 7)
        elif rel == "next":
            saturday += timedelta(weeks=1) if saturday - d < timedelta(days=1) else timedelta(0)
        return f"the weekend of {_day(saturday)}"
    if what == "month":
        return _month(*_shift_month(d, step))
    if what == "year":
        return str(d.year + step)
    target = _WEEKDAYS.index(what)
    if rel == "last":
        return _day(d - timedelta(days=(d.weekday() - target) % 7 or 7))
    if rel == "next":
        return _day(d + timedelta(days=(target - d.weekday()) % 7 or 7))
    return None  # "this Friday": past or coming, the text does not say


_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_WINDOW = re.compile(
    r"\b(?:(?P<past>(?:in )?the (?:past|last) (?P<pn>" + _NUM + r")?\s*(?P<punit>day|week|month|year)s?)"
    r"|in (?P<month>" + "|".join(_MONTHS) + r")(?: (?P<year>\d{4}))?(?! \d{1,2}\b)"
    r")\b",
    re.IGNORECASE,
)


def window(text: str, when: str | None) -> tuple[date, date] | None:
    """The span of days a question is about, from its first time phrase, as of the ISO
    time ``when`` it is asked: "last Saturday" is that day, "two weeks ago" that week,
    "last month" / "in March" that month (the latest March not after ``when``), "in the
    past two months" the two months up to ``when``. None when the text names no span."""
    if not when:
        return None
    try:
        ref = datetime.fromisoformat(when).date()
    except ValueError:
        return None
    m = _WINDOW.search(text)
    if m is not None:
        if m.group("month"):
            month = _MONTHS.index(m.group("month").lower()) + 1
            year = ref.year if month <= ref.month else ref.year - 1
            year = int(m.group("year")) if m.group("year") else year
            return date(year, month, 1), _month_end(year, month)
        raw = (m.group("pn") or "1").lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[raw]
        days = {"day": 1, "week": 7, "month": 31, "year": 366}[m.group("punit").lower()] * n
        return ref - timedelta(days=days), ref
    for hit in resolve(text, when):
        span = _span_of(hit.label)
        if span is not None:
            return span
    return None


def _month_end(year: int, month: int) -> date:
    ny, nm = (year + 1, 1) if month == 12 else (year, month + 1)
    return date(ny, nm, 1) - timedelta(days=1)


def _span_of(label: str) -> tuple[date, date] | None:
    """The days a ``resolve`` label covers."""
    for prefix, days in (("the week of ", 6), ("the weekend of ", 1)):
        if label.startswith(prefix):
            start = datetime.strptime(label[len(prefix) :], "%d %B %Y").date()
            return start, start + timedelta(days=days)
    for fmt in ("%d %B %Y", "%B %Y", "%Y"):
        try:
            start = datetime.strptime(label, fmt).date()
        except ValueError:
            continue
        if fmt == "%d %B %Y":
            return start, start
        if fmt == "%B %Y":
            return start, _month_end(start.year, start.month)
        return start, date(start.year, 12, 31)
    return None
