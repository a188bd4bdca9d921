"""storage.sync: the SQL of sync (``localmem.sync``): this device's identity, export
position and journal rows to export (``state``), and what was folded or refused from
other devices (``log``), both inside a caller's transaction; and the steps that own
their transaction, as ``layers.cues.commit_extractions`` does for enrichment: a folded
segment, a refusal, a pending change (``folding``), the device's identity and export
position (``exporting``). ``localmem.sync`` opens no transaction itself.

Only ``localmem.sync`` imports it (a contract in pyproject.toml). Imports ``write`` (the
door, the forget set) and ``engine``.
"""
