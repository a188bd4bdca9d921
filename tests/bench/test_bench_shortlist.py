"""``bench shortlist`` on a real store: brute force and the read path's dense lists agree
where the shortlist covers every row, and the report names each list."""

from __future__ import annotations

import json
import random
from pathlib import Path

from localmem.bench import shortlist
from localmem.records import TurnIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder


def test_a_shortlist_that_covers_the_store_keeps_all_of_the_exact_top_k(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = Store(db, embedder=HashEmbedder())
    rng = random.Random(3)
    words = [f"w{n}" for n in range(400)] + ["bakery", "garden", "trip"]
    # distinct random sentences: no two turns' vectors tie, so the exact top-k is one set
    store.write([TurnIn(" ".join(rng.sample(words, 9)) + ".", speaker="Ann") for _ in range(120)], session="s")
    store.close()
    data = tmp_path / "q.json"
    data.write_text(json.dumps([{"question": "What about the bakery?"}, {"question": "Which trip was 5?"}]))
    result = shortlist.run(db, data, HashEmbedder(), ks=(10, 30))
    rows = {(r["list"], r["k"]): r for r in result["lists"]}
    assert set(rows) == {(name, k) for name in ("turn cosine", "statement-cue cosine") for k in (10, 30)}
    for r in rows.values():  # 120 turns: the 500-row shortlist holds them all, so nothing can be lost
        assert r["recall_mean"] == 100.0 and r["queries_losing_any"] == 0 and r["vectors_from"] == "memory"
    assert rows[("turn cosine", 30)]["rows"] == 120
