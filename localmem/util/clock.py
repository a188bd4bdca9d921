"""The wall clock as the job table and topic layer store it: naive UTC ISO-8601 with milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now_iso(offset_s: float = 0.0) -> str:
    t = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=offset_s)
    return t.isoformat(timespec="milliseconds")
