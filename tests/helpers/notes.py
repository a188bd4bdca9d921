"""Small sessions of numbered notes (``sessions``), with or without timestamps and with
several speakers, for tests of the vector mirrors; importable by a test's subprocess."""

from __future__ import annotations

from localmem.records import SessionIn, TurnIn

WORDS = ["garden", "bicycle", "chain", "tomato", "violin", "harbor", "lantern", "pepper", "glacier", "orchid"]


def sessions(first: int, n: int, speakers: tuple[str, ...] = ("Ben", "Ana")) -> list[SessionIn]:
    """Sessions ``s<first>`` .. ``s<first + n - 1>``, each of 1-3 turns."""
    out = []
    for k in range(first, first + n):
        turns = tuple(
            TurnIn(
                text=f"Note {k}.{j}: {WORDS[(k + j) % 10]} and {WORDS[(3 * k + j) % 10]}. Then {WORDS[j % 10]}.",
                speaker=speakers[(k + j) % len(speakers)],
                timestamp=None if k % 7 == 0 else f"2024-{1 + k % 12:02d}-{1 + k % 28:02d}T10:00:00",
            )
            for j in range(1 + k % 3)
        )
        out.append(SessionIn(key=f"s{k}", turns=turns))
    return out
