"""``localmem ui``: a local web page over the store: Ask (with the trace), Find, Timeline,
a session at a turn, Turn, Injected (the recall log), Health; forget with a preview, redact.

``app`` holds the routes, the JSON API and ``serve``; ``views`` what Ask, Turn and Health
show, ``browse`` Find, the Timeline and sessions, ``forgetting`` the two writes (forget with
a preview, redact), ``injected`` the recall log's page; ``security`` the gate (loopback
Host, same-origin Origin, token cookie, the token header on every POST); ``bench`` measures
it (``localmem bench ui``); ``static/`` the page itself (plain HTML, CSS and vanilla JS,
shipped in the package, no CDN).
"""
