"""The resident fast path: a CLI query or a hook asks a process that already holds the
store open (the MCP server, ``localmem serve``) over a Unix socket, and reads in-process
only when none answers.

- ``wire``    where the socket is, what a request and a reply say (stdlib + config only);
- ``client``  the asking side (light: no numpy, no model);
- ``server``  the answering side, a thread in the resident process;
- ``local``   the read both sides do (``reconstruct``);
- ``ask``     the fast path, then in-process: what ``localmem query`` and ``localmem recall`` call.
"""
