// localmem web view: a hash router over four pages (Ask, Timeline, Turn, Health) plus a
// session page. Stored text is only ever inserted as text nodes, never as HTML.
"use strict";

const TOKEN = document.querySelector('meta[name="localmem-token"]').content;
const main = document.getElementById("main");
const REASONS = ["anchor", "temporal", "semantic", "extracted", "antecedent"];
const KIND_ORDER = { fact: 0, triple: 1, keyword: 2, statement: 3 };
const EDGE_COLOR = { antecedent: "#c2255c", semantic: "#7048e8", temporal: "#0c8599" };

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
}

async function api(path, opts) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin" }, opts || {}));
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

const when = (iso) => (iso ? iso.slice(0, 16).replace("T", " ") : "undated");
const clip = (s, n) => (s.length > n ? s.slice(0, n).trimEnd() + " …" : s);
const fmt = (x, d) => (x === null || x === undefined ? "" : Number(x).toFixed(d));
const badge = (cls, text) => h("span", { class: `badge ${cls}` }, text);
const turnLink = (id) => h("a", { href: `#/turn/${id}`, class: "mono" }, `#${id}`);
function bytes(n) {
  const u = ["B", "KB", "MB", "GB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}
function meter(frac) {
  return h("div", { class: "meter" }, (() => {
    const s = h("span");
    s.style.width = `${Math.max(0, Math.min(1, frac)) * 100}%`;
    return s;
  })());
}
function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 3500);
}
function show(...nodes) { main.replaceChildren(...nodes); }
function fail(err) { show(h("div", { class: "error", id: "error" }, String(err.message || err))); }

// --- confirmation and forget -------------------------------------------------------
function confirmDialog(text) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}
async function forget(what, text, then) {
  if (!(await confirmDialog(text))) { toast("Kept: nothing was forgotten."); return; }
  try {
    const r = await api("/api/forget", {
      method: "POST",
      headers: { "content-type": "application/json", "x-localmem-token": TOKEN },
      body: JSON.stringify(what),
    });
    toast(`Forgot ${r.forgotten} turn(s).`);
    location.hash = then;
  } catch (err) { toast(`Not forgotten: ${err.message}`); }
}

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

// --- Timeline and sessions -------------------------------------------------------
async function timelinePage() {
  const t = await api("/api/timeline");
  if (!t.days.length) { show(h("div", { class: "panel empty" }, "No sessions stored yet.")); return; }
  show(h("h1", {}, "Timeline"), h("p", { class: "sub" }, `${t.total} sessions, newest first`),
    h("div", { class: "timeline" }, t.days.map((d) => h("section", { class: "day" },
      h("h3", {}, d.day),
      h("div", { class: "sessions" }, d.sessions.map((s) =>
        h("a", { class: "session-card", href: `#/session/${s.session_id}`, "data-session": s.key },
          h("div", { class: "card-head" }, h("span", { class: "key" }, s.title || s.key),
            h("span", { class: "sub" }, `${when(s.started_at).slice(11) || "undated"} · ${s.turns} turns · ${s.source}`)),
          s.preview ? h("div", { class: "preview" }, s.preview) : null,
          h("div", { class: "chips" },
            s.topics.map((p) => h("span", { class: "chip topic", title: p.summary }, p.label)),
            s.themes.map((p) => h("span", { class: "chip theme" }, `theme: ${p.label}`))))))))));
}

async function sessionPage(id) {
  const s = await api(`/api/session/${id}`);
  show(h("div", { class: "panel" },
    h("div", { class: "head-row" },
      h("div", {}, h("h1", {}, s.title || s.key), h("div", { class: "sub" }, `${s.source} · session ${s.key} · ${when(s.started_at)} · ${s.turns.length} turns`),
        h("div", { class: "chips" }, s.topics.map((p) => h("span", { class: "chip topic", title: p.summary }, p.label)))),
      h("button", { class: "ghost-danger", id: "forget-session", onclick: () =>
        forget({ session_id: s.session_id }, `Forget session ${s.key} and its ${s.turns.length} turns? Their cues, links and vectors go with them.`, "#/timeline") },
      "Forget session…")),
    h("div", { class: "turns", id: "session-turns" }, s.turns.map((x) => h("div", { class: "turn", "data-turn": x.turn_id },
      h("span", { class: "sub mono" }, when(x.timestamp)), h("span", { class: "who" }, x.speaker || x.role),
      h("span", {}, x.text), h("span", {}, turnLink(x.turn_id)))))));
}

// --- Turn ----------------------------------------------------------------------------
function highlighted(text, cues) {
  // Cut the text at every span boundary; each piece is marked with the most specific
  // kind of cue covering it (fact > triple > keyword > statement).
  const spans = cues.filter((c) => c.span[1] > c.span[0]);
  const cuts = new Set([0, text.length]);
  for (const c of spans) { cuts.add(Math.max(0, c.span[0])); cuts.add(Math.min(text.length, c.span[1])); }
  const pts = [...cuts].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i + 1 < pts.length; i++) {
    const [a, b] = [pts[i], pts[i + 1]];
    const cover = spans.filter((c) => c.span[0] <= a && c.span[1] >= b);
    const piece = text.slice(a, b);
    if (!cover.length) { out.push(piece); continue; }
    cover.sort((x, y) => KIND_ORDER[x.kind] - KIND_ORDER[y.kind]);
    out.push(h("mark", { class: `kind-${cover[0].kind}`, title: cover.map((c) => `${c.kind}: ${c.text}`).join("\n"), "data-cues": cover.map((c) => c.cue_id).join(" ") }, piece));
  }
  return out;
}

const KIND_RANK = { antecedent: 0, semantic: 1, temporal: 2 };
function edgeNodes(t, dir) {
  // One node per linked turn and side; its line takes the strongest kind of link.
  const by = new Map();
  for (const e of t.edges.filter((x) => x.direction === dir)) {
    const n = by.get(e.turn_id) || Object.assign({}, e, { kinds: [] });
    n.kinds.push(e);
    if (KIND_RANK[e.kind] < KIND_RANK[n.kind]) Object.assign(n, e, { kinds: n.kinds });
    by.set(e.turn_id, n);
  }
  return [...by.values()].sort((a, b) => KIND_RANK[a.kind] - KIND_RANK[b.kind] || b.weight - a.weight).slice(0, 8);
}

function edgeGraph(t) {
  const W = 680, ins = edgeNodes(t, "in"), outs = edgeNodes(t, "out");
  const H = Math.max(170, 42 * Math.max(ins.length, outs.length) + 40);
  const g = svg("svg", { class: "graph", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "links in and out" });
  const defs = svg("defs");
  for (const [k, col] of Object.entries(EDGE_COLOR)) {
    defs.append(svg("marker", { id: `arrow-${k}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", fill: col })));
  }
  g.append(defs);
  const cx = W / 2, cy = H / 2;
  const node = (x, y, n) => {
    const a = svg("a", { href: `#/turn/${n.turn_id}`, class: `node kind-${n.kind}`, "data-turn": n.turn_id, "data-side": n.direction });
    const label = `#${n.turn_id} ${n.speaker ? n.speaker + ": " : ""}${n.text}`;
    a.append(svg("rect", { x: x - 95, y: y - 15, width: 190, height: 30, rx: 7, fill: "#fff", stroke: EDGE_COLOR[n.kind] || "#999" }),
      svg("text", { x: x - 86, y: y + 4, fill: "#1d2330" }, clip(label, 30)),
      svg("title", {}, n.kinds.map((e) => `${e.kind} ${e.direction} (weight ${fmt(e.weight, 3)})${e.reason ? ": " + e.reason : ""}`).join("\n") + `\n${label}`));
    return a;
  };
  const place = (list, x, dir) => list.forEach((n, i) => {
    const y = (H / (list.length + 1)) * (i + 1);
    const [x1, y1, x2, y2] = dir === "in" ? [x + 95, y, cx - 62, cy] : [cx + 62, cy, x - 95, y];
    g.append(svg("line", { x1, y1, x2, y2, stroke: EDGE_COLOR[n.kind] || "#999", "stroke-width": n.kind === "antecedent" ? 2.4 : 1.4, "marker-end": `url(#arrow-${n.kind})` }));
    g.append(node(x, y, n));
  });
  place(ins, 105, "in");
  place(outs, W - 105, "out");
  g.append(svg("text", { x: 105, y: 16, "text-anchor": "middle", fill: "#6b7383" }, "earlier / linking in"),
    svg("text", { x: W - 105, y: 16, "text-anchor": "middle", fill: "#6b7383" }, "later / linked out"));
  g.append(svg("rect", { x: cx - 60, y: cy - 20, width: 120, height: 40, rx: 9, fill: "#3b5bdb" }),
    svg("text", { x: cx, y: cy + 5, "text-anchor": "middle", fill: "#fff", "font-weight": 600 }, `turn #${t.turn_id}`));
  if (!t.edges.length) g.append(svg("text", { x: cx, y: cy + 40, "text-anchor": "middle", fill: "#6b7383" }, "no links"));
  return g;
}

async function turnPage(id) {
  const t = await api(`/api/turn/${id}`);
  const cues = [...t.cues].sort((a, b) => KIND_ORDER[a.kind] - KIND_ORDER[b.kind] || a.span[0] - b.span[0]);
  const head = h("div", { class: "head-row" },
    h("div", {}, h("h1", {}, `Turn #${t.turn_id}`, t.speaker ? ` · ${t.speaker}` : ""),
      h("div", { class: "sub" }, when(t.timestamp), " · session ", h("a", { href: `#/session/${t.session_id}` }, t.session),
        ` · place ${t.position + 1}`, t.source_id ? ` · native id ${t.source_id}` : "", t.memory_type ? " · " : "",
        t.memory_type ? badge("reason-semantic", t.memory_type) : null)),
    h("button", { class: "ghost-danger", id: "forget-turn", onclick: () =>
      forget({ turn_id: t.turn_id }, `Forget turn #${t.turn_id}${t.speaker ? ` (${t.speaker})` : ""}? Its cues, links and vectors go with it.`, `#/session/${t.session_id}`) },
    "Forget turn…"));
  const text = h("div", { class: "turn-text", id: "turn-text" }, highlighted(t.text, t.cues));
  const cueTable = cues.length ? h("table", { id: "cues" },
    h("thead", {}, h("tr", {}, ["kind", "cue", "tags", "span", "by"].map((x) => h("th", {}, x)))),
    h("tbody", {}, cues.map((c) => h("tr", { class: "cue", "data-cue": c.cue_id },
      h("td", {}, badge(`kind-${c.kind}`, c.kind)), h("td", {}, c.text),
      h("td", {}, h("div", { class: "chips" }, c.tags.map((g) => h("span", { class: "chip tag" }, g)))),
      h("td", { class: "num" }, `${c.span[0]}–${c.span[1]}`), h("td", { class: "sub" }, c.extractor))))) : h("p", { class: "empty" }, "No cues.");
  const facts = t.facts.length ? h("ul", { id: "facts" }, t.facts.map((f) => h("li", {}, badge(`kind-${f.kind}`, f.kind), " ",
    h("b", {}, f.subject || ""), ` · ${f.relation || ""} · `, h("b", {}, f.object || "")))) : h("p", { class: "empty" }, "No facts extracted (the model layer has not run on this turn, or found none).");
  const links = t.edges.length ? h("table", { id: "links" },
    h("thead", {}, h("tr", {}, ["", "kind", "turn", "weight", "verifier's reason / text"].map((x) => h("th", {}, x)))),
    h("tbody", {}, t.edges.map((e) => h("tr", { "data-kind": e.kind },
      h("td", {}, e.direction === "in" ? "← in" : "out →"), h("td", {}, badge(`reason-${e.kind}`, e.kind)),
      h("td", {}, turnLink(e.turn_id)), h("td", { class: "num" }, fmt(e.weight, 3)),
      h("td", {}, e.reason ? h("div", { class: "why" }, e.reason) : null, h("span", {}, e.speaker ? `${e.speaker}: ` : "", e.text)))))) : h("p", { class: "empty" }, "No links.");
  const legend = h("div", { class: "legend" }, Object.entries(EDGE_COLOR).map(([k, c]) => {
    const i = h("i"); i.style.background = c; return h("span", {}, i, k);
  }));
  show(h("div", { class: "panel" }, head, text,
    h("div", { class: "chips", id: "tags" }, t.tags.map((g) => h("span", { class: "chip tag" }, g)))),
  h("div", { class: "two" },
    h("section", { class: "panel" }, h("h2", {}, `Cues (${cues.length})`), cueTable, h("h2", { class: "gap" }, "Facts"), facts),
    h("section", { class: "panel" }, h("h2", {}, `Links (${t.edges.length})`), edgeGraph(t), legend, links)));
}

// --- Health --------------------------------------------------------------------------
async function healthPage() {
  const x = await api("/api/health");
  const L = x.layers;
  const card = (k, v, small) => h("div", { class: "card" }, h("div", { class: "k" }, k), h("div", { class: small ? "v small" : "v" }, v));
  const cover = (label, n, of) => h("div", { class: "cover" }, h("span", {}, label), meter(of ? n / of : 0), h("span", { class: "num mono" }, `${n} / ${of}`));
  const ante = L.antecedent || {};
  const states = ["pending", "running", "done", "parked"];
  const kinds = Object.keys(x.jobs).sort();
  show(h("h1", {}, "Health"), h("p", { class: "sub mono" }, x.db),
    h("div", { class: "cards" }, card("turns", x.turns), card("sessions", x.sessions), card("database size", bytes(x.bytes)),
      card("embedder", `${x.embedder} (${x.embedder_dim}d)`, true), card("model", x.model, true),
      card("enriched by", L.models.length ? L.models.join(", ") : "nothing yet", true)),
    h("div", { class: "two" },
      h("section", { class: "panel", id: "coverage" }, h("h2", {}, "Layer coverage"),
        cover("enriched turns", L.enriched_turns, L.turns), cover("turns with extracted cues", L.turns_with_extracted_cues, L.turns),
        cover("antecedent construction", ante.turns_processed || 0, L.turns),
        h("div", { class: "chips" },
          ...Object.entries(x.cues).map(([k, v]) => h("span", { class: "chip" }, `${v} ${k} cues`)),
          ...Object.entries(x.edges).map(([k, v]) => h("span", { class: "chip" }, `${v} ${k} links`)),
          h("span", { class: "chip" }, `${x.topics} topics`), h("span", { class: "chip" }, `${x.themes} themes`),
          h("span", { class: "chip" }, `${L.tags} tags`), h("span", { class: "chip" }, `rejected cue rate ${L.rejected_cue_rate}`))),
      h("section", { class: "panel", id: "jobs" }, h("h2", {}, "Jobs"),
        kinds.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "kind"), states.map((s) => h("th", {}, s)))),
          h("tbody", {}, kinds.map((k) => h("tr", {}, h("td", {}, k), states.map((s) => h("td", { class: "num" }, x.jobs[k][s])))))) : h("p", { class: "empty" }, "No jobs."),
        x.running.length ? h("div", {}, h("h3", {}, "Running"), h("ul", {}, x.running.map((j) => h("li", { class: "mono" }, `job ${j.job} ${j.kind} turn ${j.turn_id} by ${j.owner} until ${j.until}`)))) : null,
        h("h3", {}, `Parked (${x.parked.length})`),
        x.parked.length ? h("table", { id: "parked" }, h("tbody", {}, x.parked.map((j) => h("tr", {},
          h("td", { class: "num" }, j.job), h("td", {}, j.kind), h("td", {}, turnLink(j.turn_id)), h("td", { class: "num" }, `${j.attempts}×`),
          h("td", { class: "why" }, j.error))))) : h("p", { class: "empty" }, "None: no job gave up."))));
}

// --- router ------------------------------------------------------------------------
async function route() {
  const [path, query] = (location.hash.slice(1) || "/ask").split("?");
  const parts = path.split("/").filter(Boolean);
  const page = parts[0] || "ask";
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.dataset.page === page || (page === "session" && a.dataset.page === "timeline"));
  }
  try {
    if (page === "ask") askPage(new URLSearchParams(query || ""));
    else if (page === "timeline") await timelinePage();
    else if (page === "session") await sessionPage(Number(parts[1]));
    else if (page === "turn") await turnPage(Number(parts[1]));
    else if (page === "health") await healthPage();
    else show(h("p", { class: "empty" }, "No such page."));
    main.dataset.page = page;
  } catch (err) { fail(err); }
}
window.addEventListener("hashchange", route);
api("/api/health").then((x) => { document.getElementById("db-path").textContent = x.db; }, () => {});
route();
