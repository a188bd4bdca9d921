"""storage.bench: bench-only SQL: synthetic stores written in bulk outside the journal
(``synthetic``), the counts and checks the benchmarks read (``reads``, ``lme_reads``) and
what two synced stores must agree on (``sync_checks``).

Only ``localmem.bench`` imports it (a contract in pyproject.toml); nothing on a user's
write or read path does. Imports ``layers``, ``write`` (the enqueue of the synthetic
stores' jobs) and ``engine``.
"""
