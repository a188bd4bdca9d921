"""Coding agents' hooks: what localmem does when Claude Code, Codex CLI or Gemini CLI
starts a session, takes a prompt, stops or compacts (docs/capture.md).

- ``events``: the clients' hook payloads (JSON on stdin) read into one ``HookEvent``,
  and the reply each client reads (``hookSpecificOutput.additionalContext``);
- ``status``: the hooks' outcomes, counted in a small file beside the store, which
  ``doctor`` and ``stats`` read (a hook fails quietly to the agent, loudly there);
- ``fast``: a session start's or a prompt's recall asked of the store's resident process
  (``localmem.resident``), light: no numpy, no model, no store opened;
- ``run``: the work of each event in the hook's own process (recall for session start and
  prompts when no resident process answered, ingest of the transcript's new part on stop /
  compaction / session end) within a deadline;
- ``install``: the entries merged into each client's settings file (with a backup).

Invariant: a hook never breaks the agent. Whatever happens (a locked or full store, a
missing key, a bad payload, its deadline), the hook process exits 0 and prints either
a reply the client reads or nothing; the failure is counted and named in ``status``.
``events`` and ``status`` import nothing but the standard library.
"""
