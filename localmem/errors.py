"""The exception hierarchy. Library code raises these; the CLI and the MCP server
translate them to exit codes / tool errors at the edge, never earlier.

``LocalmemError.exit_code`` is the CLI exit status for the class. ``StoreError`` and its
subclasses are SQLite's failures said in words (``localmem.storage.engine.faults`` makes them):
one line naming the file and the cause.
"""

from __future__ import annotations


class LocalmemError(Exception):
    exit_code = 1


class ConfigError(LocalmemError):
    exit_code = 2


class InputError(LocalmemError):
    """Bad user data: the message names the file and the location (line, JSON path)."""

    exit_code = 3

    def __init__(self, message: str, *, path: str | None = None, where: str | None = None):
        self.path = path
        self.where = where
        prefix = ""
        if path:
            prefix = f"{path}"
            if where:
                prefix += f" at {where}"
            prefix += ": "
        super().__init__(prefix + message)


class SchemaError(LocalmemError):
    """The database's schema is newer than this code, or a migration failed."""

    exit_code = 4


class EmbedderMismatch(LocalmemError):
    """The store holds vectors of another embedding model."""

    exit_code = 5


class ModelError(LocalmemError):
    """A model could not be found, loaded or run."""

    exit_code = 6


class NotFound(LocalmemError):
    exit_code = 7


class StoreError(LocalmemError):
    """The database file could not be used as asked; the message names the file and why."""

    exit_code = 8

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(message)


class StoreFull(StoreError):
    """No room to write: the disk, a quota, or the process's file-size limit."""


class StoreReadOnly(StoreError):
    """The file, its folder or its file system cannot be written (reads may still work)."""


class StoreLocked(StoreError):
    """Another process held the database's lock for longer than this writer waits."""


class StoreCorrupt(StoreError):
    """The file is damaged: SQLite found pages or records it cannot read."""


class NotAStore(StoreError):
    """The file is not an SQLite database (or is encrypted with a key we do not have)."""


class StoreUnavailable(StoreError):
    """The file cannot be opened, or the operating system failed a read or write of it."""
