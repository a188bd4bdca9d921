"""A store's socket path fits a Unix socket address whatever ``$HOME`` is: at every length of
``$HOME`` from 10 to 120 characters without ``$XDG_RUNTIME_DIR`` (ssh without pam_systemd,
a container, cron; the long macOS user folder too) the socket and the temporary name the
server binds first fit, in the runtime dir or else in ``/tmp/localmem-<uid>``, and a real
daemon a query started serves the next query (before, a ``$HOME`` of ~35-44 characters
gave a path that fitted but a bind name that did not: every query started a daemon that
exited 2, and ``localmem doctor`` said ok). The short folder is used only when it is this
user's, private and not a link; a server whose socket file was removed binds it again; and
``localmem doctor`` names why no process can serve.

Every daemon a test started is stopped when it ends, and the files it left in
``/tmp/localmem-<uid>`` are removed."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localmem.cli.doctor import resident
from localmem.cli.doctor_mcp import Warn
from localmem.resident import unix, wire
from localmem.resident.server import ResidentServer
from localmem.storage.write.store import Store
from tests.helpers.fastentry import Q, ingest, run
from tests.helpers.resident import answers, daemons

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets only")


def make_home(length: int) -> Path:
    """A new folder whose path is exactly ``length`` characters (10 or more): a short random
    one in /tmp, padded with a subfolder; :func:`remove_home` removes it."""
    while True:
        root = Path("/tmp") / f"l{secrets.token_hex(2)}"  # 10 characters
        try:
            root.mkdir(mode=0o700)
            break
        except FileExistsError:
            continue
    home = root if length == len(str(root)) else root / ("h" * (length - len(str(root)) - 1))
    home.mkdir(mode=0o700, exist_ok=True)
    assert len(str(home)) == length
    return home


def remove_home(home: Path) -> None:
    shutil.rmtree(Path("/tmp") / home.relative_to("/tmp").parts[0], ignore_errors=True)


def own_home(monkeypatch: pytest.MonkeyPatch, home: str) -> None:
    """This process's folders as a user whose ``$HOME`` is ``home`` and who has no
    ``$XDG_RUNTIME_DIR`` nor ``$XDG_DATA_HOME``."""
    monkeypatch.setenv("HOME", home)
    for name in ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)


def forget(path: Path | str) -> None:
    """Remove what a server and a daemon leave beside a socket (its lock and log)."""
    stem = os.path.splitext(path)[0]
    for suffix in (".sock", ".lock", ".log"):
        with contextlib.suppress(OSError):
            os.unlink(stem + suffix)


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_every_home_length_gives_a_socket_and_a_bind_name_that_fit(
    system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pure function of the environment, so a client and the server it started agree; and
    the OS takes both names (bound here for real, in a folder of the same length)."""
    monkeypatch.setattr(unix.sys, "platform", system)
    db = tmp_path / "s.db"
    short = []
    for length in range(10, 121):
        own_home(monkeypatch, "/" + "h" * (length - 1))
        natural = os.path.join(str(unix.runtime_dir()), unix.socket_name(db))
        path = unix.socket_in(str(unix.runtime_dir()), db)
        assert path is not None and unix.fits(path)
        assert str(wire.socket_path(db)) == path  # the server's rule is the clients' one
        assert (path == natural) if unix.fits(natural) else (os.path.dirname(path) == unix.fallback_dir())
        short.append(path != natural)
        temp = unix.bind_name(path)
        assert os.path.dirname(temp) == os.path.dirname(path) and len(temp) == len(path) <= unix.SUN_PATH_MAX
        assert unix.bind_name(path) != temp  # random: two servers starting at once do not collide
    assert short[0] is False and short[-1] is True  # both folders were used
    # and the OS takes a name of the longest length bound
    folder = make_home(unix.SUN_PATH_MAX - 1 - len(unix.socket_name(db)))
    try:
        longest = unix.bind_name(folder / unix.socket_name(db))
        assert len(longest) == unix.SUN_PATH_MAX
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(longest)
    finally:
        remove_home(folder)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder of this test to stand for /tmp (short: a socket path in it fits)."""
    folder = make_home(12)
    yield folder
    remove_home(folder)


def refuse_folder(kind: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the short folder one that may not hold this user's sockets."""
    if kind == "open":
        folder.mkdir(mode=0o700)
        folder.chmod(0o755)
    elif kind == "link":  # to a private folder of this user: still refused
        (folder.parent / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(folder.parent / "elsewhere")
    else:  # another user made /tmp/localmem-<uid> first: seen as that user, whose uid is not ours
        folder.mkdir(mode=0o700)
        uid = os.getuid()
        monkeypatch.setattr(unix.os, "getuid", lambda: uid + 1)
        monkeypatch.setattr(unix, "fallback_dir", lambda: str(folder))


@pytest.mark.parametrize(
    ("kind", "said"), [("open", "mode 755"), ("link", "symbolic link"), ("foreign", "another user")]
)
def test_a_short_folder_that_is_not_private_is_refused(
    kind: str, said: str, store: Store, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unix, "SHARED_TMP", str(short_tmp))  # /tmp's place: the test's own folder
    own_home(monkeypatch, "/" + "h" * 100)  # the runtime dir's path does not fit
    path = wire.socket_path(store.path)
    assert path is not None and path.parent == Path(unix.fallback_dir())
    refuse_folder(kind, path.parent, monkeypatch)
    assert not unix.private_folder(path.parent, create=True)
    srv = ResidentServer(store)
    assert not srv.start(standby=False)  # not bound there
    assert not os.path.lexists(path)
    if kind != "foreign":  # a socket file of this user there: a client does not ask it either
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(str(path))
            assert unix.socket_to_ask(str(wire.runtime_dir()), store.path) is None
            os.unlink(path)
    with pytest.raises(Warn, match=said):  # `localmem doctor` names it
        resident(store.path)


def test_a_server_binds_its_socket_again_when_a_cleaner_removed_its_folder(
    store: Store, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unix, "SHARED_TMP", str(short_tmp))
    own_home(monkeypatch, "/" + "h" * 100)
    with ResidentServer(store) as srv:
        assert srv.path is not None and srv.path.parent == Path(unix.fallback_dir())
        shutil.rmtree(srv.path.parent)  # systemd-tmpfiles, a person
        deadline = time.monotonic() + 10
        while not answers(srv.path):
            assert time.monotonic() < deadline, "not bound again"
            time.sleep(0.05)
        assert stat.S_IMODE(srv.path.parent.stat().st_mode) == 0o700
        assert unix.socket_to_ask(str(wire.runtime_dir()), store.path) == str(srv.path)
    assert not srv.path.exists()  # and removed on stop, as the first one


def test_doctor_names_the_failure_the_last_daemon_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.db"
    db.write_bytes(unix.SQLITE_MAGIC + bytes(4080))
    path = wire.socket_path(db)
    assert path is not None and unix.private_folder(path.parent, create=True)
    assert resident(db).startswith("no process serves this store")  # nothing logged: no daemon yet
    path.with_suffix(".log").write_text(  # what the daemons of the bug wrote, one after another
        "localmem-mcp: WARNING resident socket not served: AF_UNIX path too long\n"
        "localmem: error: cannot serve s.db's socket: another process serves it, or no private folder\n"
    )
    with pytest.raises(Warn, match=r"could not serve it: .*AF_UNIX path too long.*its log: "):
        resident(db)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # served now: the old log says nothing
        s.bind(str(path))
        s.listen(1)
        assert "serves this store" in resident(db)


# ---- real daemons -------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for every length (its socket's name is the same at each)."""
    db = tmp_path_factory.mktemp("store") / "s.db"
    ingest(db)
    return db


def wait_for(what: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def long_home(stored: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], dict[str, str]]]:
    """The environment of a user with a ``$HOME`` of a given length and no
    ``$XDG_RUNTIME_DIR`` / ``$XDG_DATA_HOME``, the query daemon on (this process's too, so
    that ``wire.socket_path`` here is the daemon's); afterwards its daemon is stopped and
    its folders removed."""
    homes: list[Path] = []

    def env_of(length: int) -> dict[str, str]:
        homes.append(make_home(length))
        own_home(monkeypatch, str(homes[-1]))
        return {**os.environ, "LOCALMEM_QUERY_DAEMON_IDLE": "600"}

    yield env_of
    for pid in daemons(stored):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    if not wait_for(lambda: not daemons(stored), 15):
        for pid in daemons(stored):
            os.kill(pid, signal.SIGKILL)
    for home in homes:
        remove_home(home)
    forget(os.path.join(unix.fallback_dir(), unix.socket_name(stored)))


@pytest.mark.parametrize("length", [10, 40, 60, 80, 100, 120])
def test_a_daemon_serves_the_second_query_at_every_home_length(
    length: int, stored: Path, long_home: Callable[[int], dict[str, str]], tmp_path: Path
) -> None:
    env = long_home(length)
    first = run(["query", Q], db=stored, cwd=tmp_path, env=env)
    assert first.code == 0 and first.full_cli  # in-process; a daemon started once it printed
    (pid,) = daemons(stored)
    path = wire.socket_path(stored)
    assert path is not None
    wait_for(lambda: answers(path) or not daemons(stored), 120)  # served, or the daemon gave up
    log = path.with_suffix(".log")
    assert answers(path), f"no daemon serves $HOME of {length}: {log.read_text() if log.exists() else 'no log'}"
    second = run(["query", Q], db=stored, cwd=tmp_path, env=env)
    assert not second.full_cli  # answered over the socket
    assert (second.stdout, second.code) == (first.stdout, first.code)
    assert daemons(stored) == [pid]  # the first daemon serves: none started again
    assert f"a daemon (pid {pid}) serves this store" in resident(stored)  # `localmem doctor`'s line
