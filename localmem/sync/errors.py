"""Sync's exceptions: a folder that cannot be used, a segment refused, one not arrived yet."""

from __future__ import annotations

from localmem.errors import LocalmemError


class SyncError(LocalmemError):
    """A sync folder or store that cannot be used as asked."""


class Refused(LocalmemError):
    """A segment that will not be folded: the reason names the file and the check."""


class Incomplete(LocalmemError):
    """A segment not fully arrived yet (shorter than its header says)."""
