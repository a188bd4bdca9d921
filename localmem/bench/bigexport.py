"""A big, realistic ChatGPT export (``conversations.json``) written as a stream, for
``localmem bench import``.

The file has the shape of a real data export: a JSON array of conversations, each with
``title``, ``create_time``, ``update_time``, ``mapping`` (node id -> ``{id, message,
parent, children}``, a root node without a message), ``current_node``,
``conversation_id``, ``default_model_slug``. Per conversation (seeded, so runs compare):
- a hidden system message first, then exchanges (user, then assistant); exchanges per
  conversation geometric with mean 8, so ~18 messages a conversation;
- user messages of lognormal length (median 110 characters), assistant replies of
  lognormal length (median 1,300, capped at 20,000), a quarter of them with a fenced code
  block, many with bullet lists; words from the embedding model's own vocabulary in Zipf
  order (its WordPiece list is roughly frequency-ordered), plus a topic's own words;
- 4% of user messages in another script or with emoji and accents (unicode), 2% with an
  image part (``multimodal_text``);
- 8% of assistant replies regenerated (an off-branch sibling), 3% of user messages edited
  (an off-branch sibling with its own reply), 5% of exchanges calling a tool (an
  assistant message to ``python`` and a ``tool`` message before the visible reply).

``messages`` counts every message object in the file (system, tool and off-branch ones
too), as a user would count an export; ``turns`` counts those ``localmem ingest`` keeps
(user and assistant messages on the current branch, not hidden, not to a tool). The file
is written one conversation at a time: memory stays at one conversation whatever N is.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

GENERATOR = "chatgpt-export-v1"
START = 1_640_995_200.0  # 2022-01-01 UTC: two years of history before the last message
SPAN_S = 2 * 365 * 86400
_UNICODE = ["café", "naïve", "Straße", "日本語で説明して", "😀", "🚀", "Ελληνικά", "привет", "déjà vu", "中文"]
_CODE_LANGS = ["python", "javascript", "sql", "bash"]


@dataclass
class ExportStats:
    path: str
    messages: int = 0
    conversations: int = 0
    turns: int = 0  # what `localmem ingest` keeps
    bytes: int = 0
    seed: int = 0
    generator: str = GENERATOR


def _words() -> list[str]:
    text = (resources.files("localmem") / "data" / "minilm-vocab.txt").read_text("utf-8")
    return [w for w in text.split() if w.isascii() and w.isalpha() and w.islower() and len(w) > 1]


class _Text:
    """Seeded chat-like text: Zipf words from a real vocabulary, topic words, sentences."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = _words()
        weights = [1.0 / (r + 1) for r in range(len(self.words))]
        self.cum = _cumulative(weights)
        self.topic: list[str] = []

    def new_topic(self) -> None:
        mid = self.words[300:12000]
        self.topic = self.rng.sample(mid, 12)

    def sentence(self, n: int) -> str:
        ws = self.rng.choices(self.words, cum_weights=self.cum, k=max(n, 2))
        for i in range(len(ws)):
            if self.topic and self.rng.random() < 0.2:
                ws[i] = self.rng.choice(self.topic)
        end = "?" if self.rng.random() < 0.1 else "."
        return ws[0].capitalize() + " " + " ".join(ws[1:]) + end

    def prose(self, chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            s = self.sentence(int(self.rng.lognormvariate(math.log(13), 0.4)))
            out.append(s)
            size += len(s) + 1
        return " ".join(out)

    def word(self) -> str:
        return self.rng.choices(self.words, cum_weights=self.cum)[0]


def _cumulative(weights: list[float]) -> list[float]:
    out, acc = [], 0.0
    for w in weights:
        acc += w
        out.append(acc)
    return out


class _Conversation:
    """One conversation's mapping tree, built node by node."""

    def __init__(self, rng: random.Random, t0: float) -> None:
        self.rng = rng
        self.t = t0
        self.mapping: dict[str, dict[str, Any]] = {}
        self.messages = 0
        self.turns = 0
        self.root = self._node(None, None)

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _node(self, parent: str | None, message: dict[str, Any] | None) -> str:
        nid = message["id"] if message else self.uid()
        self.mapping[nid] = {"id": nid, "message": message, "parent": parent, "children": []}
        if parent is not None:
            self.mapping[parent]["children"].append(nid)
        if message is not None:
            self.messages += 1
        return nid

    def add(self, parent: str, role: str, content: dict[str, Any], *, kept: bool, **extra: Any) -> str:
        self.t += self.rng.uniform(5, 90)
        meta: dict[str, Any] = extra.pop("metadata", {})
        message = {
            "id": self.uid(),
            "author": {"role": role, "name": extra.pop("name", None), "metadata": {}},
            "create_time": round(self.t, 6),
            "update_time": None,
            "content": content,
            "status": "finished_successfully",
            "end_turn": True if role == "assistant" else None,
            "weight": 1.0,
            "metadata": meta,
            "recipient": extra.pop("recipient", "all"),
            "channel": None,
        }
        self.turns += kept
        return self._node(parent, message)


def _text(parts: list[Any]) -> dict[str, Any]:
    return {"content_type": "text", "parts": parts}


def _user_text(tx: _Text) -> str:
    text = tx.prose(max(8, min(int(tx.rng.lognormvariate(math.log(110), 0.9)), 6000)))
    if tx.rng.random() < 0.04:
        text += " " + " ".join(tx.rng.sample(_UNICODE, 2))
    return text


def _assistant_text(tx: _Text) -> str:
    chars = min(int(tx.rng.lognormvariate(math.log(1300), 0.7)), 20_000)
    paras: list[str] = []
    size = 0
    while size < chars:
        roll = tx.rng.random()
        if roll < 0.15:
            para = "\n".join(f"- {tx.sentence(tx.rng.randint(4, 12))}" for _ in range(tx.rng.randint(2, 5)))
        elif roll < 0.22 and not any(p.startswith("```") for p in paras):
            para = _code(tx)
        else:
            para = tx.prose(tx.rng.randint(200, 600))
        paras.append(para)
        size += len(para) + 2
    if tx.rng.random() < 0.25 and not any(p.startswith("```") for p in paras):
        paras.insert(min(1, len(paras)), _code(tx))
    return "\n\n".join(paras)


def _code(tx: _Text) -> str:
    lang = tx.rng.choice(_CODE_LANGS)
    names = [tx.word() for _ in range(6)]
    lines = [f"def {names[0]}_{names[1]}({names[2]}):"]
    for i in range(tx.rng.randint(2, 12)):
        lines.append(f"    {names[i % 6]} = {names[(i + 1) % 6]}.{tx.word()}({i})  # {tx.word()}")
    lines.append(f"    return {names[3]}")
    return f"```{lang}\n" + "\n".join(lines) + "\n```"


def conversation(rng: random.Random, tx: _Text, t0: float, max_messages: int) -> tuple[dict[str, Any], int, int]:
    """One conversation of at most ``max_messages`` messages; returns it, its message
    count and the turns ``localmem ingest`` keeps of it."""
    tx.new_topic()
    c = _Conversation(rng, t0)
    hidden = {"is_visually_hidden_from_conversation": True}
    node = c.add(c.root, "system", _text([""]), kept=False, metadata=hidden)
    exchanges = 1 + int(math.log(1 - rng.random()) / math.log(1 - 1 / 8))
    for _ in range(exchanges):
        if c.messages + 7 > max_messages:  # an exchange has at most 7 messages
            break
        if rng.random() < 0.03:  # an edited question: the old one and its reply stay off the branch
            old = c.add(node, "user", _text([_user_text(tx)]), kept=False)
            c.add(old, "assistant", _text([_assistant_text(tx)]), kept=False)
        parts: list[Any] = [_user_text(tx)]
        if rng.random() < 0.02:
            pointer = {"content_type": "image_asset_pointer", "asset_pointer": f"file-service://file-{c.uid()[:8]}"}
            parts.insert(0, pointer)
        content = {"content_type": "multimodal_text", "parts": parts} if len(parts) > 1 else _text(parts)
        node = c.add(node, "user", content, kept=True)
        if rng.random() < 0.05:  # a tool call and its output before the visible reply
            code = {"content_type": "code", "language": "unknown", "text": _code(tx).strip("`")}
            node = c.add(node, "assistant", code, kept=False, recipient="python")
            out = {"content_type": "execution_output", "text": tx.sentence(6)}
            node = c.add(node, "tool", out, kept=False, name="python")
        if rng.random() < 0.08:  # a regenerated reply: the first one stays off the branch
            c.add(node, "assistant", _text([_assistant_text(tx)]), kept=False)
        node = c.add(node, "assistant", _text([_assistant_text(tx)]), kept=True)
    cid = c.uid()
    conv = {
        "title": tx.sentence(rng.randint(2, 6)).rstrip(".?"),
        "create_time": t0,
        "update_time": round(c.t, 6),
        "mapping": c.mapping,
        "moderation_results": [],
        "current_node": node,
        "plugin_ids": None,
        "conversation_id": cid,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": rng.choice(["gpt-4o", "gpt-4", "text-davinci-002-render-sha"]),
        "id": cid,
    }
    return conv, c.messages, c.turns


def write_export(path: Path, messages: int, *, seed: int = 0) -> ExportStats:
    """Write an export of exactly ``messages`` messages to ``path``, one conversation at a time."""
    rng = random.Random(seed)
    tx = _Text(rng)
    stats = ExportStats(path=str(path), seed=seed)
    tmp = path.with_name(path.name + ".part")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write("[")
        while stats.messages < messages:
            left = messages - stats.messages
            t0 = START + SPAN_S * stats.messages / messages + rng.uniform(0, 3600)
            conv, n, kept = conversation(rng, tx, round(t0, 6), left)  # near the end: shorter ones
            fh.write(("," if stats.conversations else "") + "\n" + json.dumps(conv, ensure_ascii=False))
            stats.messages += n
            stats.turns += kept
            stats.conversations += 1
        fh.write("\n]\n")
    tmp.replace(path)
    stats.bytes = path.stat().st_size
    return stats
