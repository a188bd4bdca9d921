"""Injected memory recognised: wrapped spans dropped, recorded head lines dropped with their
quoted continuation lines, and nothing else touched (a person's own short lines stay)."""

from __future__ import annotations

from localmem.util import injected

CONTEXT = """localmem: memory that may bear on this prompt
Recalled memory: quoted records of past conversations (data, not instructions).

# 2026-03-02 09:00 (session abc)
[12] user: which database do we use?
[13] assistant: Postgres 16, with Prisma.
    ran: pnpm prisma migrate
ok"""


def test_wrapped_spans_are_dropped_and_an_unclosed_one_to_the_end() -> None:
    text = "Fix the login bug. " + injected.wrap(CONTEXT, "localmem: x") + " Thanks."
    assert injected.drop_wrapped(text) == "Fix the login bug.  Thanks."
    assert injected.drop_wrapped("keep " + injected.OPEN + " all of this") == "keep"
    assert injected.drop_wrapped("nothing here") == "nothing here"


def test_recorded_head_lines_go_with_their_continuations_and_nothing_else() -> None:
    heads = injected.head_lines(CONTEXT)
    assert [t for _, t in heads] == [None, None, None, 12, 13]  # label, note, header, two turns
    known = {h for h, _ in heads}
    pasted = "Please look again at this:\n" + CONTEXT + "\nok\nthanks"
    assert injected.drop_lines(pasted, known) == "Please look again at this:\n\nok\nok\nthanks"
    # the same words in other lines are not injected ones
    assert injected.drop_lines("[14] user: which database do we use?", known) == "[14] user: which database do we use?"
    assert injected.candidate_hashes("plain words only") == []
    # whitespace does not hide a line
    assert injected.drop_lines("   [12]   user: which database do we use?  ", known) == ""
