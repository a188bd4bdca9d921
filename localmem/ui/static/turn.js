// localmem web view: the Turn page (text with cue spans, cues, facts, links, what recalled it,
// tool lines) and redacting a span of it.
"use strict";

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
const LINKS_SHOWN = 12;
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
        t.memory_type ? badge("reason-semantic", t.memory_type) : null, " · ",
        h("a", { href: `#/session/${t.session_id}?turn=${t.turn_id}`, id: "in-context" }, "in its session")),
      h("div", { class: "sub mono", title: "its identity on every device" }, `${t.role} · hash ${t.hash}`),
      t.project ? h("div", { class: "sub", id: "turn-project" }, `${t.client || "agent"} in `, h("span", { class: "mono" }, t.project.cwd),
        t.project.branch ? ` · branch ${t.project.branch}` : "", t.project.repository ? ` · ${t.project.repository}` : "") : null),
    h("div", { class: "actions" },
      h("button", { class: "secondary", id: "redact", title: "select part of the text first", onclick: () => redactSelection(t) }, "Redact selection…"),
      h("button", { class: "ghost-danger", id: "forget-turn", onclick: () =>
        forgetPreviewed({ turns: [t.turn_id] }, `turn #${t.turn_id}${t.speaker ? ` (${t.speaker})` : ""}`, `#/session/${t.session_id}`) },
      "Forget turn…")));
  const text = h("div", { class: "turn-text", id: "turn-text" }, highlighted(t.text, t.cues));
  const cueTable = cues.length ? h("table", { id: "cues" },
    h("thead", {}, h("tr", {}, ["kind", "cue", "tags", "span", "by"].map((x) => h("th", {}, x)))),
    h("tbody", {}, cues.map((c) => h("tr", { class: "cue", "data-cue": c.cue_id },
      h("td", {}, badge(`kind-${c.kind}`, c.kind)), h("td", {}, c.text),
      h("td", {}, h("div", { class: "chips" }, c.tags.map((g) => h("span", { class: "chip tag" }, g)))),
      h("td", { class: "num" }, `${c.span[0]}–${c.span[1]}`), h("td", { class: "sub" }, c.extractor))))) : h("p", { class: "empty" }, "No cues.");
  const facts = t.facts.length ? h("ul", { id: "facts" }, t.facts.map((f) => h("li", {}, badge(`kind-${f.kind}`, f.kind), " ",
    h("b", {}, f.subject || ""), ` · ${f.relation || ""} · `, h("b", {}, f.object || "")))) : h("p", { class: "empty" }, "No facts extracted (the model layer has not run on this turn, or found none).");
  // The strongest LINKS_SHOWN links (antecedent first), the rest a click away: a turn of a
  // long history can have hundreds.
  const linkRow = (e) => h("tr", { "data-kind": e.kind },
    h("td", {}, e.direction === "in" ? "← in" : "out →"), h("td", {}, badge(`reason-${e.kind}`, e.kind)),
    h("td", {}, turnLink(e.turn_id)), h("td", { class: "num" }, fmt(e.weight, 3)),
    h("td", {}, e.reason ? h("div", { class: "why" }, e.reason) : null, h("span", {}, e.speaker ? `${e.speaker}: ` : "", e.text)));
  const body = h("tbody", {}, t.edges.slice(0, LINKS_SHOWN).map(linkRow));
  const rest = t.edges.length > LINKS_SHOWN ? h("button", { class: "secondary", id: "links-all", onclick: (e) => {
    body.append(...t.edges.slice(LINKS_SHOWN).map(linkRow)); e.target.remove();
  } }, `Show all ${t.edges.length} links`) : null;
  const links = t.edges.length ? h("div", {}, h("table", { id: "links" },
    h("thead", {}, h("tr", {}, ["", "kind", "turn", "weight", "verifier's reason / text"].map((x) => h("th", {}, x)))), body), rest)
    : h("p", { class: "empty" }, "No links.");
  const legend = h("div", { class: "legend" }, Object.entries(EDGE_COLOR).map(([k, c]) => {
    const i = h("i"); i.style.background = c; return h("span", {}, i, k);
  }));
  show(h("div", { class: "panel" }, head, text,
    h("div", { class: "chips", id: "tags" }, t.tags.map((g) => h("span", { class: "chip tag" }, g))),
    t.tool_lines.length ? h("div", { id: "tool-lines" }, h("h2", { class: "gap" }, `Tool calls (${t.tool_lines.length})`),
      h("ul", { class: "mono" }, t.tool_lines.map((l) => h("li", {}, l)))) : null),
  h("div", { class: "two" },
    h("section", { class: "panel" }, h("h2", {}, `Cues (${cues.length})`), cueTable, h("h2", { class: "gap" }, "Facts"), facts),
    h("section", { class: "panel" }, h("h2", {}, `Links (${t.edges.length})`), edgeGraph(t), legend, links)),
  recalledPanel(t.recalls));
}

function recalledPanel(r) {
  const queries = r.queries.length ? h("table", { id: "recall-queries" },
    h("thead", {}, h("tr", {}, ["query", "calls", "clients", "last (UTC)"].map((x) => h("th", {}, x)))),
    h("tbody", {}, r.queries.map((q) => h("tr", {}, h("td", {}, q.query), h("td", { class: "num" }, q.calls),
      h("td", { class: "sub" }, q.clients), h("td", { class: "sub mono" }, when(q.last))))))
    : h("p", { class: "empty" }, "No call in the recall log handed this turn to a client.");
  const sessions = r.sessions.length ? h("ul", { id: "recall-sessions" }, r.sessions.map((x) =>
    h("li", {}, h("b", {}, x.client), ` session ${x.session}: ${x.calls} call(s), last ${when(x.last)}`))) : null;
  return h("section", { class: "panel", id: "recalls" },
    h("h2", {}, `Recalled: ${r.calls} call(s)`),
    h("p", { class: "sub" }, `From the recall log: the newest ${r.keep} reconstruct calls made for clients (MCP, localmem query, agent hooks), kept on this device only. `,
      h("a", { href: "#/injected" }, "See every call.")),
    queries, sessions ? h("h3", { class: "gap" }, "Client sessions that recalled it most") : null, sessions);
}

// --- redact a span -----------------------------------------------------------------------
// The selection's character offsets in the turn's text: the text node pieces of #turn-text
// concatenate to the stored text, so a range from its start measures them.
function selectionSpan(container) {
  const sel = window.getSelection();
  if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null;
  const r = sel.getRangeAt(0);
  if (!container.contains(r.startContainer) || !container.contains(r.endContainer)) return null;
  const before = document.createRange();
  before.setStart(container, 0);
  before.setEnd(r.startContainer, r.startOffset);
  // in code points, as the server counts them (an emoji is one character there, two here)
  const start = Array.from(before.toString()).length;
  return { start, end: start + Array.from(r.toString()).length, text: r.toString() };
}

async function redactSelection(t) {
  const span = selectionSpan(document.getElementById("turn-text"));
  if (!span || !span.text.trim()) { toast("Select the part of the turn's text to redact first."); return; }
  const ok = await confirmDialog(
    `Replace “${clip(span.text, 80)}” (characters ${span.start}–${span.end}) with [secret: manual]? ` +
    "The turn keeps its place but becomes a new turn: its cues, links and vectors are rebuilt, and what a model " +
    "derived from it is dropped and extracted again. The original is forgotten: sync carries the forget and the " +
    "redacted turn to your other devices. There is no undo.", "Redact", "Redact this span?");
  if (!ok) { toast("Kept: nothing was redacted."); return; }
  try {
    const r = await post("/api/redact", { turn_id: t.turn_id, start: span.start, end: span.end, hash: t.hash, text: span.text });
    if (r.forgotten) {  // its redacted text was another turn's already: the original was forgotten
      toast("The redacted text was stored already as another turn; this one was forgotten.");
      location.hash = `#/session/${r.session_id}`;
      return;
    }
    toast(`Redacted: the turn is now #${r.turn_id}.`);
    location.hash = `#/turn/${r.turn_id}`;
  } catch (err) { toast(`Not redacted: ${err.message}`); }
}

