"""The agents' real CLIs with localmem's hooks installed: Claude Code, Codex and Gemini CLI
from npm (the versions pinned in ``tests.helpers.agent_clis.PINS``, which ``.ci/run``
installs into ``.ci/node``), each talking to a loopback stand-in of its model API
(``localmem.bench.agent_apis``) that records every request. This folder mirrors no package
of localmem: it tests the hooks, the parsers of the clients' transcripts and the recall
together, through the clients themselves. Skipped where a CLI is absent; a failure in CI
(``LOCALMEM_REQUIRE_AGENTS``)."""
