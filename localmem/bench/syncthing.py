"""Real Syncthing daemons for ``localmem bench sync``: one per device, each with its own
home and copy of the folder, on 127.0.0.1 only (no global or local discovery, no relays,
no NAT traversal, no usage reporting), paired through the REST API (``/rest/config``).

Needs the ``syncthing`` binary (Debian package ``syncthing``); talks to it with urllib.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localmem.errors import LocalmemError

FOLDER_ID = "localmem-sync"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Daemon:
    name: str
    home: Path
    folder: Path
    gui_port: int = field(default_factory=free_port)
    listen_port: int = field(default_factory=free_port)
    apikey: str = "localmem-bench-key"
    proc: subprocess.Popen[bytes] | None = None
    device_id: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gui_port}"

    def start(self) -> None:
        binary = shutil.which("syncthing")
        if binary is None:
            raise LocalmemError("bench sync needs Syncthing: apt-get install syncthing (Debian) or syncthing.net")
        self.home.mkdir(parents=True, exist_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [binary, "generate", f"--home={self.home}", "--no-default-folder", "--skip-port-probing"],
            check=True,
            capture_output=True,
        )
        log = (self.home / "syncthing.log").open("ab")
        self.proc = subprocess.Popen(
            [
                binary,
                "serve",
                f"--home={self.home}",
                "--no-browser",
                "--no-restart",
                "--no-upgrade",
                "--no-default-folder",
                "--skip-port-probing",
                f"--gui-address=http://127.0.0.1:{self.gui_port}",
                f"--gui-apikey={self.apikey}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"STNODEFAULTFOLDER": "1", "STNOUPGRADE": "1", "HOME": str(self.home), "PATH": "/usr/bin:/bin"},
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.device_id = str(self.get("/rest/system/status")["myID"])
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise LocalmemError(
                        f"syncthing for {self.name} did not start (see {self.home}/syncthing.log)"
                    ) from None
                time.sleep(0.3)
        self.patch(
            "/rest/config/options",
            {
                "listenAddresses": [f"tcp://127.0.0.1:{self.listen_port}"],
                "globalAnnounceEnabled": False,
                "localAnnounceEnabled": False,
                "relaysEnabled": False,
                "natEnabled": False,
                "urAccepted": -1,
                "crashReportingEnabled": False,
                "autoUpgradeIntervalH": 0,
                "startBrowser": False,
            },
        )

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={"X-API-Key": self.apikey})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw.strip() else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body)

    def pair(self, peers: list[Daemon]) -> None:
        """Know every peer at its 127.0.0.1 address and share the folder with all of them."""
        for p in peers:
            self.request(
                "POST",
                "/rest/config/devices",
                {"deviceID": p.device_id, "name": p.name, "addresses": [f"tcp://127.0.0.1:{p.listen_port}"]},
            )
        self.request(
            "POST",
            "/rest/config/folders",
            {
                "id": FOLDER_ID,
                "label": "localmem",
                "path": str(self.folder),
                "type": "sendreceive",
                "devices": [{"deviceID": d.device_id} for d in [self, *peers]],
                "fsWatcherEnabled": True,
                "fsWatcherDelayS": 1,
                "rescanIntervalS": 60,
            },
        )
        if self.get("/rest/config/restart-required").get("requiresRestart"):
            self.request("POST", "/rest/system/restart")
            time.sleep(1)
            deadline = time.monotonic() + 60
            while True:
                try:
                    self.get("/rest/system/status")
                    break
                except (urllib.error.URLError, ConnectionError, OSError):
                    if time.monotonic() > deadline:
                        raise LocalmemError(f"syncthing for {self.name} did not come back after a restart") from None
                    time.sleep(0.3)

    def connected(self) -> int:
        conns = self.get("/rest/system/connections")["connections"]
        return sum(1 for c in conns.values() if c.get("connected"))

    def wire_bytes(self) -> tuple[int, int]:
        """(bytes in, bytes out) over all this daemon's connections so far."""
        total = self.get("/rest/system/connections")["total"]
        return int(total.get("inBytesTotal", 0)), int(total.get("outBytesTotal", 0))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.request("POST", "/rest/system/shutdown")
                self.proc.wait(timeout=15)
            except (urllib.error.URLError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def mesh(root: Path, names: list[str]) -> list[Daemon]:
    """Start one daemon per name under ``root`` and pair them all; returns them connected."""
    daemons = [Daemon(n, root / n / "syncthing", root / n / "folder") for n in names]
    try:
        for d in daemons:
            d.start()
        for d in daemons:
            d.pair([p for p in daemons if p is not d])
        deadline = time.monotonic() + 90
        while any(d.connected() < len(daemons) - 1 for d in daemons):
            if time.monotonic() > deadline:
                raise LocalmemError("the Syncthing daemons did not connect to each other within 90 s")
            time.sleep(0.5)
    except BaseException:
        for d in daemons:
            d.stop()
        raise
    return daemons
