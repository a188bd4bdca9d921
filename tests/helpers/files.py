"""The filesystem under a test: ``fs_type`` names the kind of filesystem a path is on."""

from __future__ import annotations

from pathlib import Path


def fs_type(path: Path) -> str:
    """The type of the filesystem holding ``path``, from the longest matching mount point."""
    best, kind = "", ""
    target = str(path.resolve())
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        mount = fields[1].replace("\\040", " ")
        if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
            best, kind = mount, fields[2]
    return kind
