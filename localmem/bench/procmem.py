"""A process's memory as Linux reports it in ``/proc/PID/status``, for the benches.

Invariant: lines in MiB (floats); an empty dict where there is no ``/proc`` (not
Linux) or the process is gone, never an error.
"""

from __future__ import annotations

from pathlib import Path

KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def status_mb(pid: int | str = "self") -> dict[str, float]:
    """The resident-memory lines (``KEYS``) of process ``pid``'s status, in MiB."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in KEYS:
                out[key] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return out
