// localmem web view, shared by every page script: element builders, the JSON API (GETs,
// and POSTs carrying the token header), dialogs, the filter bar, and forget with a preview.
// Stored text is only ever inserted as text nodes (textContent), never as HTML.
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

async function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-localmem-token": TOKEN },
    body: JSON.stringify(body),
  });
}
function hashParams() { return new URLSearchParams((location.hash.split("?")[1]) || ""); }
function go(path, params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) p.set(k, v);
  const q = p.toString();
  location.hash = q ? `${path}?${q}` : path;
}

// Words of a query, to mark in result texts (as <mark> elements around text nodes). A word
// is marked where a word starts ("ram" in "RAM stick", not in "programs"), as the lists match.
const STOP = new Set("a an the and or but of to in on at by for with about from is are was were be been do does did i me my we our you your he she it its they them this that what which who when where why how not no can could would should will".split(" "));
function queryWords(q) {
  return [...new Set((q || "").toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) || [])].filter((w) => !STOP.has(w));
}
function marked(text, words) {
  if (!words.length) return [text];
  const esc = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const re = new RegExp(`(?<![\\p{L}\\p{N}])(${esc.join("|")})`, "giu");
  return text.split(re).map((part, i) => (i % 2 ? h("mark", { class: "hit" }, part) : part));
}

// --- dialogs -------------------------------------------------------------------------
function confirmDialog(text, ok, title) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title || "Are you sure?";
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok || "Forget";
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

// Forget with a preview: the server counts what the selection takes with it and returns a
// digest of its turns; confirming sends the digest back, so what goes is what was shown.
function previewBody(p) {
  const kinds = (o) => Object.entries(o).filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(", ") || "none";
  const items = [
    ["turns", `${p.turns}${p.first ? ` (${when(p.first)} to ${when(p.last)})` : ""}`],
    ["sessions", `${p.sessions} touched, ${p.sessions_emptied} deleted with their last turn`],
    ["cues", kinds(p.cues)],
    ["links", kinds(p.edges)],
    ["topics losing a turn", p.topics],
    ["recall-log rows", p.recalls],
    ["jobs still to run", p.jobs],
  ];
  return [
    h("table", { class: "counts", id: "preview-counts" }, h("tbody", {}, items.map(([k, v]) =>
      h("tr", { "data-count": k }, h("th", {}, k), h("td", {}, String(v)))))),
    p.sample.length ? h("ul", { class: "sample", id: "preview-sample" }, p.sample.map((t) =>
      h("li", { "data-turn": t.turn_id }, h("span", { class: "sub mono" }, `#${t.turn_id} ${when(t.timestamp)} `),
        h("b", {}, t.speaker ? `${t.speaker}: ` : ""), clip(t.text, 140)))) : null,
    p.turns > p.sample.length ? h("p", { class: "sub" }, `… and ${p.turns - p.sample.length} more.`) : null,
    h("p", { class: "reach" }, p.reach),
    h("p", { class: "reach" }, p.not_reached),
    h("p", { class: "undo", id: "preview-undo" }, p.undo),
  ];
}
async function forgetPreviewed(selection, what, then) {
  let p;
  try { p = await post("/api/forget/preview", { selection }); } catch (err) { toast(`No preview: ${err.message}`); return false; }
  const dlg = document.getElementById("forget-dialog");
  document.getElementById("forget-title").textContent = p.turns ? `Forget ${what}?` : `Nothing to forget in ${what}`;
  document.getElementById("forget-body").replaceChildren(...previewBody(p).filter(Boolean));
  const ok = document.getElementById("forget-ok");
  ok.textContent = `Forget ${p.turns} turn${p.turns === 1 ? "" : "s"}`;
  ok.disabled = !p.turns;
  const yes = await new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
  if (!yes) { toast("Kept: nothing was forgotten."); return false; }
  try {
    const r = await post("/api/forget", { selection, digest: p.digest });
    FACETS = null;  // the filters' counts changed
    toast(`Forgot ${r.forgotten} turn(s).`);
    if (then) location.hash = then; else route();
    return true;
  } catch (err) { toast(`Not forgotten: ${err.message}`); return false; }
}

// --- the filter bar (Find and Timeline) -------------------------------------------------
let FACETS = null;
async function facets() { if (!FACETS) FACETS = await api("/api/facets"); return FACETS; }
const FILTER_LABEL = { source: "any source", speaker: "any speaker", role: "any role", client: "any agent", project: "any project" };
function filterBar(params, f) {
  const box = h("div", { class: "filters", id: "filters" },
    h("label", { class: "inline" }, "from", h("input", { type: "date", id: "f-start", value: params.get("start") || "" })),
    h("label", { class: "inline" }, "to", h("input", { type: "date", id: "f-end", value: params.get("end") || "" })));
  const lists = { source: f.sources, speaker: f.speakers, role: f.roles, client: f.clients, project: f.projects };
  // a filter with nothing to choose from (no agent's sessions stored) is left out
  for (const name of f.filters.filter((n) => lists[n] && (lists[n].length || params.get(n)))) {
    const sel = h("select", { id: `f-${name}`, "data-filter": name }, h("option", { value: "" }, FILTER_LABEL[name] || `any ${name}`),
      lists[name].map((o) => h("option", { value: o.value }, `${o.value || "(none)"} · ${o.sessions ?? o.turns}`)));
    sel.value = params.get(name) || "";
    box.append(sel);
  }
  return box;
}
function filterValues() {
  const out = {};
  for (const el of document.querySelectorAll("#filters input, #filters select")) {
    const name = el.dataset.filter || el.id.replace(/^f-/, "");
    if (el.value) out[name] = el.value;
  }
  return out;
}
function filterQuery(params) {
  const out = {};
  for (const k of (FACETS ? FACETS.filters : ["start", "end", "source", "speaker", "role"])) if (params.get(k)) out[k] = params.get(k);
  return out;
}
