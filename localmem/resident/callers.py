"""A caller's settings, as its own process would load them: what a resident process needs to
answer a raw command line (op ``cli``: ``localmem.cli.served``; op ``hook-cli``:
``localmem.hooks.served``), the one rule for both.

:class:`CallerSettings` checks that the caller's sources can be read here as the caller
reads them (the variables platformdirs reads are this process's own, ``$LOCALMEM_CONFIG``
is absolute), then loads ``config.settings_from`` the caller's ``LOCALMEM_*`` variables
and the config file they name, with the caller's flags.

Invariants:
- anything that cannot be read as the caller would read it is ``wire.Refused`` (the
  caller then loads its settings itself); a bad setting is a ``LocalmemError``, which the
  planners turn into a refusal too;
- settings are loaded once per set of sources (the variables, the config file's path,
  size, mtime and inode, the flags), so a served call parses no TOML; at most ``CACHED``
  sets are kept; safe to call from any thread.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from typing import Any

from localmem.config import Settings, config_file, settings_from
from localmem.resident import wire

CACHED = 16  # sets of settings kept (callers with other variables, other config files)


class CallerSettings:
    """The settings of callers (module docstring), cached by their sources."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settings: dict[str, Settings] = {}

    def load(self, env: dict[str, str], platform: dict[str, str | None], **flags: Any) -> Settings:
        """The settings a caller with ``env`` (its ``LOCALMEM_*`` variables), ``platform``
        (its values of ``wire.PLATFORM_ENV``) and ``flags`` (``settings_from``'s overrides)
        loads; ``wire.Refused`` when they cannot be read here as it reads them."""
        for name in wire.PLATFORM_ENV:
            if platform.get(name) != os.environ.get(name):
                raise wire.Refused(f"${name} is not this process's")
        conf = env.get("LOCALMEM_CONFIG")
        if conf and not os.path.isabs(conf):
            raise wire.Refused("$LOCALMEM_CONFIG is relative to the caller's folder")
        path = config_file(env)
        try:
            st = os.stat(path)
            source = [str(path), st.st_size, st.st_mtime_ns, st.st_ino] if stat.S_ISREG(st.st_mode) else None
        except OSError:
            source = None
        key = json.dumps([sorted(env.items()), source, sorted(flags.items())], default=str)
        with self._lock:
            hit = self._settings.get(key)
        if hit is None:
            hit = settings_from(env, **flags)
            with self._lock:
                while len(self._settings) >= CACHED:
                    self._settings.pop(next(iter(self._settings)))  # the oldest
                self._settings[key] = hit
        return hit
