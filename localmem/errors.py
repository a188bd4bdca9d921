"""The exception hierarchy. Library code raises these; the CLI and the MCP server
translate them to exit codes / tool errors at the edge, never earlier.

``LocalmemError.exit_code`` is the CLI exit status for the class.
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
