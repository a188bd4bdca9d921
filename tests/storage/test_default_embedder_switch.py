"""The default embedder changed (issue 39: "default" now means the packaged
localmem-chat-minilm-l6, trained for memory). Stores written before keep working with no
action: a store MiniLM wrote, whether its record says "minilm", the old alias "default" or
no spec at all, opened by the real CLI with the setting left at default, reads with MiniLM
(never an EmbedderMismatch, never a silent reembed); `--embedder minilm` reads it too;
`localmem reembed --model default` moves it to the trained model. A new store records the
trained model's unambiguous spec, never "default"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from localmem.config import Settings
from localmem.models import registry
from localmem.models.embedding import OnnxMiniLM
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db as dbm
from localmem.storage.vectors import rebuild
from localmem.storage.write.store import Store
from tests.helpers.cli import run

TURNS = (
    "I adopted a golden retriever named Max last spring.",
    "We moved to Lisbon in May; the flat has a balcony facing the river.",
    "My sister Ines plays the cello in an orchestra on Thursdays.",
    "The physio gave me clamshell exercises for my knee.",
)
QUESTION = "What is my dog called?"


@pytest.fixture(scope="module")
def minilm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("old") / "m.db"
    with Store(path, embedder=registry.default_embedder("minilm"), settings=Settings(db=path)) as store:
        store.write_sessions([SessionIn("s1", tuple(TurnIn(text=t, speaker="Maya") for t in TURNS))])
    return path


def _with_spec(src: Path, dst: Path, spec: str | None) -> Path:
    """A copy of ``src`` whose record says ``spec`` (as stores written by older versions do)."""
    shutil.copyfile(src, dst)
    conn = dbm.connect(dst)
    with dbm.transaction(conn):
        rec = rebuild.recorded(conn)
        assert rec is not None
        rebuild.record_embedder(conn, rec.embedder_id, rec.dim, spec)
    conn.close()
    return dst


def _recorded(path: Path) -> rebuild.Recorded:
    conn = dbm.connect(path)
    try:
        rec = rebuild.recorded(conn)
    finally:
        conn.close()
    assert rec is not None
    return rec


def test_the_default_is_the_trained_model_and_minilm_stays_available() -> None:
    default = registry.default_embedder()
    assert default.model_id.startswith("localmem-chat-minilm-l6@") and default.dim == 384
    assert getattr(default, "spec", None) == "localmem-chat-minilm-l6"  # never "default"
    minilm = registry.default_embedder("minilm")
    assert minilm.model_id == OnnxMiniLM.model_id and getattr(minilm, "spec", None) == "minilm"
    assert registry.default_embedder(OnnxMiniLM.model_id).model_id == OnnxMiniLM.model_id
    assert registry.default_embedder(default.model_id).model_id == default.model_id


def test_a_minilm_store_records_its_unambiguous_spec(minilm_store: Path) -> None:
    rec = _recorded(minilm_store)
    assert (rec.embedder_id, rec.spec) == (OnnxMiniLM.model_id, "minilm")


@pytest.mark.parametrize("spec", ["minilm", "default", None], ids=["minilm", "old-default-alias", "no-spec"])
def test_an_old_minilm_store_opens_with_minilm_and_no_action(
    minilm_store: Path, tmp_path: Path, spec: str | None
) -> None:
    db = _with_spec(minilm_store, tmp_path / "m.db", spec)
    before = db.read_bytes()
    out = json.loads(run("query", QUESTION, "--json", db=db).stdout)
    assert "golden retriever" in out["turns"][0]["text"]
    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["embedder"] == OnnxMiniLM.model_id
    explicit = json.loads(run("--embedder", "minilm", "query", QUESTION, "--json", db=db).stdout)
    assert explicit["turns"] == out["turns"]
    assert _recorded(db).embedder_id == OnnxMiniLM.model_id  # nothing reembedded behind the user's back
    assert db.read_bytes() == before or _recorded(db).spec == spec


def test_reembed_to_the_default_moves_an_old_store_to_the_trained_model(minilm_store: Path, tmp_path: Path) -> None:
    db = _with_spec(minilm_store, tmp_path / "m.db", "default")
    report = json.loads(run("reembed", "--model", "default", "--json", db=db).stdout)
    assert report["switched"] is True
    rec = _recorded(db)
    assert rec.embedder_id.startswith("localmem-chat-minilm-l6@") and rec.spec == "localmem-chat-minilm-l6"
    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["embedder"] == rec.embedder_id
    out = json.loads(run("query", QUESTION, "--json", db=db).stdout)
    assert "golden retriever" in out["turns"][0]["text"]
    refused = run("--embedder", "minilm", "query", QUESTION, db=db, check=False)
    assert refused.returncode == 5 and "--embedder localmem-chat-minilm-l6" in refused.stderr


def test_a_new_store_records_the_trained_models_spec(tmp_path: Path) -> None:
    db, log = tmp_path / "new.db", tmp_path / "chat.jsonl"
    log.write_text(json.dumps({"session": "s1", "speaker": "Maya", "text": TURNS[0]}) + "\n", "utf-8")
    run("ingest", str(log), db=db)
    rec = _recorded(db)
    assert rec.embedder_id.startswith("localmem-chat-minilm-l6@") and rec.spec == "localmem-chat-minilm-l6"
