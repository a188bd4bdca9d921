// localmem web view: the Ask page (a question, the context a client gets, and its trace).
"use strict";

// --- Ask ----------------------------------------------------------------------------
function askPage(params) {
  const q = h("input", { type: "search", id: "ask-q", placeholder: "Ask your memory a question…", value: params.get("q") || "" });
  const budget = h("input", { type: "number", id: "ask-budget", min: 1, value: params.get("budget") || 2000, title: "token budget" });
  const asOf = h("input", { type: "text", id: "ask-as-of", class: "small", placeholder: "as of (ISO time)", value: params.get("as_of") || "" });
  const scope = h("input", { type: "text", id: "ask-scope", class: "small", placeholder: "scope (source or session)", value: params.get("scope") || "" });
  const out = h("div", { id: "ask-out" });
  const form = h("form", { class: "ask", id: "ask-form", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams({ q: q.value, budget: budget.value, as_of: asOf.value, scope: scope.value });
    location.hash = `#/ask?${p}`;
  } }, q, h("label", { class: "inline" }, "budget", budget), asOf, scope, h("button", { id: "ask-go" }, "Ask"));
  show(h("div", { class: "panel" }, form), out);
  q.focus();
  if (!q.value.trim()) {
    out.append(h("p", { class: "empty" }, "Ask a question to see the context a client would get, and why each turn is in it."));
    return;
  }
  out.append(h("p", { class: "empty" }, "Reconstructing…"));
  const p = new URLSearchParams({ q: q.value, budget: budget.value, as_of: asOf.value, scope: scope.value });
  api(`/api/ask?${p}`).then((t) => out.replaceChildren(askResult(t)), (err) => out.replaceChildren(h("div", { class: "error", id: "error" }, err.message)));
}

function askResult(t) {
  const ctx = t.context;
  const left = h("section", { class: "panel", id: "context-panel" },
    h("h2", {}, "Context, as a client gets it"),
    h("div", { class: "sub" }, `${ctx.tokens} / ${ctx.budget_tokens} tokens · ${ctx.turns.length} turns`),
    meter(ctx.tokens / ctx.budget_tokens),
    h("pre", { class: "context", id: "context-text" }, ctx.text || "(nothing relevant found)"));
  const c = t.counts;
  const rows = t.turns.map((x) => {
    const bars = h("span", { class: "bars", title: Object.entries(x.features).map(([k, v]) => `${k} ${v}`).join("\n") });
    for (const v of Object.values(x.features)) {
      const b = h("span");
      b.style.height = `${Math.max(1, Math.min(16, 16 * Math.abs(v) / (v > 1.5 ? v : 1)))}px`;
      bars.append(b);
    }
    return h("tr", { class: "trace-row", "data-turn": x.turn_id, "data-status": x.status, "data-reason": x.reason,
      onclick: () => { location.hash = `#/turn/${x.turn_id}`; } },
      h("td", { class: "num" }, x.rank || "+"),
      h("td", {}, turnLink(x.turn_id)),
      h("td", {}, badge(`reason-${x.reason}`, x.reason)),
      h("td", { class: "snippet" }, h("b", {}, x.speaker ? `${x.speaker}: ` : ""), clip(x.text, 140),
        x.why ? h("div", { class: "why" }, x.why) : null),
      h("td", { class: "num" }, fmt(x.score, 4)),
      h("td", { class: "num" }, x.words),
      h("td", {}, badge(`status-${x.status.replace(" ", "-")}`, x.status)),
      h("td", {}, Object.keys(x.features).length ? bars : h("span", { class: "muted" }, "—")));
  });
  const right = h("section", { class: "panel", id: "trace-panel" },
    h("h2", {}, "Trace"),
    h("div", { class: "chips" },
      h("span", { class: "chip count" }, h("b", {}, ctx.stats.candidates), " candidates"),
      h("span", { class: "chip count" }, h("b", {}, t.anchors), " anchors"),
      h("span", { class: "chip count" }, h("b", {}, c.packed), " packed"),
      h("span", { class: "chip count" }, h("b", {}, c.antecedent), " antecedent"),
      h("span", { class: "chip count" }, h("b", {}, c.evicted), " evicted"),
      h("span", { class: "chip count" }, h("b", {}, c["not packed"]), " not packed")),
    h("div", { class: "sub" }, `budget used: ${t.used_words} of ${t.cap_words} words`),
    meter(t.cap_words ? t.used_words / t.cap_words : 0),
    t.turns.length ? h("table", { id: "trace" },
      h("thead", {}, h("tr", {}, ["#", "turn", "reason", "text", "P(evidence)", "words", "fate", "features"].map((x) => h("th", {}, x)))),
      h("tbody", {}, rows)) : h("p", { class: "empty" }, "No candidate turns."));
  return h("div", { class: "ask-grid" }, left, right);
}

