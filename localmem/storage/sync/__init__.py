"""storage.sync: the SQL of sync (``localmem.sync``): this device's identity, export
position and journal rows to export (``state``), and what was folded or refused from
other devices (``log``).

Only ``localmem.sync`` imports it (a contract in pyproject.toml). Imports ``write`` (the
door, the forget set) and ``engine``.
"""
