"""Active reconstruction: the local model walks the memory graph with the toolkit.

MRAgent (sections 4.1-4.2, Appendix B.2) in two modes:

- **Navigate**: each round the model reads the question and what it has found so far
  and writes a JSON object (schema-constrained): a short thought, whether the evidence
  is sufficient (``done``) and up to ``max_calls`` tool calls, each a toolkit function
  name and its arguments. The calls are validated and run; their results, compact and
  cut to a fixed size, go back to the model as the next message. Unknown tools, bad
  arguments and toolkit errors (no such cue, bad date) become error lines the model
  reads, never exceptions.
- **Answer**: when the model says ``done`` or a bound is reached, one last call sees
  the collected evidence turns and writes the answer, the turn ids that support it
  and a confidence.

Bounds: at most ``max_rounds`` Navigate rounds (default 8) and ``max_calls`` calls per
round (default 10, the paper's D.4 settings); ``max_tokens`` caps prompt + generated
tokens over every model call of one question (a round that would not fit is not
started); the conversation sent to the model is kept under ``max_prompt_tokens`` by
replacing the oldest rounds' results with one-line summaries. The first round is
seeded without a model call by ``search_cues(question)``, the paper's initial active
set. Every round, call, error and the evidence each round added is kept in the trace.

This package re-exports the public API; import from here. Its modules:

- :mod:`~localmem.answering.explore.tools`: the tools the model may call, validating and running
  one call, compact results;
- :mod:`~localmem.answering.explore.prompts`: the Navigate and Answer prompts with their JSON
  schemas, and the messages built from them;
- :mod:`~localmem.answering.explore.trace`: the trace records (``Call``, ``Round``, ``Exploration``);
- :mod:`~localmem.answering.explore.loop`: :func:`explore` itself, its bounds and defaults.
"""

from __future__ import annotations

from localmem.answering.explore.loop import (
    ANSWER_TOKENS,
    EVIDENCE_TOKENS,
    MAX_CALLS,
    MAX_PROMPT_TOKENS,
    MAX_ROUNDS,
    MAX_TOKENS,
    NAVIGATE_TOKENS,
    explore,
)
from localmem.answering.explore.prompts import (
    ANSWER_PROMPT,
    ANSWER_SCHEMA,
    NAVIGATE_PROMPT,
    answer_messages,
    evidence_text,
    navigate_messages,
    navigate_schema,
    prompt_size,
    tool_list,
)
from localmem.answering.explore.tools import (
    RESULT_CHARS,
    RESULT_ITEMS,
    SNIPPET_CHARS,
    TOOLS,
    Param,
    Tool,
    compact,
    run_call,
    validate,
)
from localmem.answering.explore.trace import Call, Exploration, Round

__all__ = [
    "ANSWER_PROMPT",
    "ANSWER_SCHEMA",
    "ANSWER_TOKENS",
    "EVIDENCE_TOKENS",
    "MAX_CALLS",
    "MAX_PROMPT_TOKENS",
    "MAX_ROUNDS",
    "MAX_TOKENS",
    "NAVIGATE_PROMPT",
    "NAVIGATE_TOKENS",
    "RESULT_CHARS",
    "RESULT_ITEMS",
    "SNIPPET_CHARS",
    "TOOLS",
    "Call",
    "Exploration",
    "Param",
    "Round",
    "Tool",
    "answer_messages",
    "compact",
    "evidence_text",
    "explore",
    "navigate_messages",
    "navigate_schema",
    "prompt_size",
    "run_call",
    "tool_list",
    "validate",
]
