"""Making the resident server's listening socket (``server.ResidentServer``): bound under
a temporary name as long as the final one (``unix.bind_name``), given mode 600, then renamed
into place in the private folder, so nobody ever finds it with wider access; and whether a
live process already accepts on a socket path.

Invariants: never raises for a refused bind or folder: the caller gets why, in words.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from localmem.resident import client, unix

log = logging.getLogger("localmem.resident")


def open_socket(path: Path, accept_s: float) -> tuple[socket.socket, int] | str:
    """A socket listening at ``path`` and the file's inode; else why not ('' when another
    live process serves it)."""
    problem = unix.folder_problem(path.parent, create=True)
    if problem is not None:
        return f"{problem} (the socket's folder must be this user's, mode 700)"
    if answers(path):
        log.debug("resident socket %s is served by another process", path)
        return ""
    tmp = Path(unix.bind_name(path))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(tmp))
        os.chmod(tmp, 0o600)
        sock.listen(16)
        sock.settimeout(accept_s)
        os.replace(tmp, path)
        return sock, os.lstat(path).st_ino
    except OSError as exc:
        sock.close()
        tmp.unlink(missing_ok=True)
        return f"{path}: {exc}"


def answers(path: Path) -> bool:
    """Whether a process accepts connections on the socket at ``path``."""
    return client.answers(path)
