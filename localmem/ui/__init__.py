"""``localmem ui``: a local web page over the store (Ask, Timeline, Turn, Health, forget).

``app`` holds the routes, the JSON API and ``serve``; ``views`` what each page shows;
``security`` the gate (loopback Host, same-origin Origin, token cookie); ``static/``
the page itself (plain HTML, CSS and vanilla JS, shipped in the package, no CDN).
"""
