// localmem web view: the memory browser. Find (one box for words and meaning, filters,
// paged results, each opening its session at the turn; tick results to forget them),
// the Timeline of every session with counts per month, and a session opened at a turn.
"use strict";

// --- Find ------------------------------------------------------------------------------
async function findPage(params) {
  const f = await facets();
  const q = h("input", { type: "search", id: "find-q", placeholder: "Search every turn: words or meaning…", value: params.get("q") || "" });
  const match = h("select", { id: "find-match", title: "which of the read path's ranked lists" },
    h("option", { value: "all" }, "words + meaning"), h("option", { value: "words" }, "words only"), h("option", { value: "meaning" }, "meaning only"));
  match.value = params.get("match") || "all";
  const submit = (e) => { e.preventDefault(); go("#/find", { q: q.value.trim(), match: match.value === "all" ? "" : match.value, ...filterValues() }); };
  const form = h("form", { class: "ask", id: "find-form", onsubmit: submit }, q, match, h("button", { id: "find-go" }, "Find"));
  const out = h("div", { id: "find-out" }, h("p", { class: "empty" }, "Searching…"));
  show(h("div", { class: "panel" }, form, filterBar(params, f)), out);
  if (!params.get("q")) q.focus();
  const page = Number(params.get("page") || 0);
  const api_q = new URLSearchParams({ q: params.get("q") || "", page, match: match.value, ...filterQuery(params) });
  const r = await api(`/api/find?${api_q}`);
  out.replaceChildren(findResults(r, params));
}

function findResults(r, params) {
  const words = r.ranked ? queryWords(r.query) : [];
  const picked = new Set();
  const count = h("span", { id: "picked-count" }, "0");
  const forgetPicked = h("button", { class: "ghost-danger", id: "forget-picked", disabled: true, onclick: () =>
    forgetPreviewed({ turns: [...picked] }, `the ${picked.size} selected turn(s)`) }, "Forget selected (", count, ")…");
  const update = () => { count.textContent = String(picked.size); forgetPicked.disabled = !picked.size; };
  const rows = r.results.map((x) => {
    const box = h("input", { type: "checkbox", class: "pick", "data-turn": x.turn_id, title: "select to forget",
      onchange: (e) => { if (e.target.checked) picked.add(x.turn_id); else picked.delete(x.turn_id); update(); } });
    const open = `#/session/${x.session_id}?turn=${x.turn_id}`;
    return h("div", { class: "result", "data-turn": x.turn_id },
      box,
      h("div", {},
        h("div", { class: "result-head" },
          h("a", { href: open, class: "open" }, x.title || x.session),
          h("span", { class: "sub" }, ` · ${when(x.timestamp)} · ${x.source} · `), h("b", {}, x.speaker || x.role),
          x.role && x.speaker && x.role !== x.speaker ? h("span", { class: "sub" }, ` (${x.role})`) : null,
          x.words ? badge("match-words", "words") : null, x.meaning ? badge("match-meaning", "meaning") : null),
        h("a", { href: open, class: "result-text" }, marked(x.text, words)),
        h("div", { class: "sub" }, turnLink(x.turn_id), r.ranked ? ` · rrf ${fmt(x.score, 4)} · ${x.lists.join(", ")}` : "")));
  });
  const page = r.page;
  const pager = h("div", { class: "pager" },
    h("button", { class: "secondary", id: "page-prev", disabled: page <= 0, onclick: () => go("#/find", { ...Object.fromEntries(params), page: page - 1 }) }, "← Newer / better"),
    h("span", { id: "page-at", class: "sub" }, `page ${page + 1} of ${r.pages}`),
    h("button", { class: "secondary", id: "page-next", disabled: page + 1 >= r.pages, onclick: () => go("#/find", { ...Object.fromEntries(params), page: page + 1 }) }, "Next →"));
  const filt = Object.keys(r.filters).length;
  const summary = r.ranked
    ? `${r.total} turns found for “${r.query}”${filt ? " under the filters" : ""}, best first (the read path's ranked lists: ${r.match})`
    : `${r.total} turns${filt ? " match the filters" : " in the store"}, newest first`;
  const forgetAll = !r.ranked && filt && r.total ? h("button", { class: "ghost-danger", id: "forget-filter", onclick: () =>
    forgetPreviewed({ filter: r.filters }, `all ${r.total} turns that match these filters`) }, `Forget all ${r.total} matching…`) : null;
  const pickAll = h("button", { class: "secondary", id: "pick-all", onclick: () => {
    for (const b of document.querySelectorAll("#results input.pick")) { b.checked = true; picked.add(Number(b.dataset.turn)); }
    update();
  } }, "Select this page");
  return h("div", {},
    h("div", { class: "head-row" }, h("p", { class: "sub", id: "find-summary" }, summary), h("div", { class: "actions" }, pickAll, forgetPicked, forgetAll)),
    r.results.length ? h("div", { class: "results panel", id: "results" }, rows) : h("p", { class: "empty" }, "Nothing found."),
    r.pages > 1 ? pager : null);
}

// --- Timeline ------------------------------------------------------------------------
async function timelinePage(params) {
  const f = await facets();
  const flt = filterQuery(params);
  const submit = (e) => { e.preventDefault(); go("#/timeline", filterValues()); };
  const [m, first] = await Promise.all([
    api(`/api/months?${new URLSearchParams(flt)}`),
    api(`/api/timeline?${new URLSearchParams({ ...flt, offset: params.get("offset") || 0 })}`),
  ]);
  const list = h("div", { class: "timeline", id: "timeline" });
  const more = h("button", { class: "secondary", id: "timeline-more" }, "Older sessions ↓");
  let next = first.next;
  const append = (t) => {
    for (const d of t.days) {
      const last = list.lastElementChild;
      const day = last && last.dataset.day === d.day ? last : h("section", { class: "day", "data-day": d.day }, h("h3", {}, d.day), h("div", { class: "sessions" }));
      day.lastElementChild.append(...d.sessions.map(sessionCard));
      if (day !== last) list.append(day);
    }
    next = t.next;
    more.hidden = next === null;
  };
  more.addEventListener("click", async () => { more.disabled = true; try { append(await api(`/api/timeline?${new URLSearchParams({ ...flt, offset: next })}`)); } finally { more.disabled = false; } });
  append(first);
  const offset = Number(params.get("offset") || 0);
  const months = h("nav", { class: "months", id: "months" }, h("div", { class: "sub" }, `${m.sessions} sessions · ${m.turns} turns`),
    h("div", { class: "month-head" }, h("span", {}, "month"), h("span", { class: "num" }, "sessions"), h("span", { class: "num" }, "turns")),
    m.months.map((x) => h("a", { href: "#", "data-month": x.month, "data-offset": x.offset,
      class: offset >= x.offset && offset < x.offset + x.sessions ? "active" : null,
      onclick: (e) => { e.preventDefault(); go("#/timeline", { ...flt, offset: x.offset }); } },
    h("span", {}, x.month), h("span", { class: "num" }, `${x.sessions}`), h("span", { class: "num sub" }, `${x.turns}`))));
  const newer = offset > 0 ? h("button", { class: "secondary", id: "timeline-newer", onclick: () => go("#/timeline", flt) }, "↑ Newest") : null;
  show(h("div", { class: "panel" }, h("form", { class: "ask", id: "timeline-form", onsubmit: submit }, filterBar(params, f), h("button", { id: "timeline-go" }, "Filter"))),
    h("div", { class: "browse-grid" }, months,
      h("div", {}, h("h1", {}, "Timeline"), h("p", { class: "sub", id: "timeline-total" }, `${first.total} sessions${Object.keys(flt).length ? " match the filters" : ""}, newest first${offset ? ` (from the ${offset + 1}th)` : ""}`),
        newer, first.total ? list : h("div", { class: "panel empty" }, Object.keys(flt).length ? "No session matches the filters." : "No sessions stored yet."), more)));
  // Scrolling to the end loads the next page, as the button does.
  const seen = new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting) && next !== null && !more.disabled) more.click(); });
  seen.observe(more);
}

function sessionCard(s) {
  return h("a", { class: "session-card", href: `#/session/${s.session_id}`, "data-session": s.key, "data-session-id": s.session_id },
    h("div", { class: "card-head" }, h("span", { class: "key" }, s.title || s.key),
      h("span", { class: "sub" }, `${when(s.started_at).slice(11) || "undated"} · ${s.turns} turns · ${s.source}`)),
    s.preview ? h("div", { class: "preview" }, s.preview) : null,
    h("div", { class: "chips" },
      s.topics.map((p) => h("span", { class: "chip topic", title: p.summary }, p.label)),
      s.themes.map((p) => h("span", { class: "chip theme" }, `theme: ${p.label}`))));
}

// --- a session, opened at a turn ----------------------------------------------------------
async function sessionPage(id, params) {
  const q = new URLSearchParams();
  if (params.get("turn")) q.set("turn", params.get("turn"));
  else if (params.get("offset")) q.set("offset", params.get("offset"));
  const s = await api(`/api/session/${id}?${q}`);
  const windowLink = (label, offset, elId) => (offset === null ? null :
    h("a", { class: "window", id: elId, href: `#/session/${id}?offset=${offset}` }, label));
  show(h("div", { class: "panel" },
    h("div", { class: "head-row" },
      h("div", {}, h("h1", {}, s.title || s.key), h("div", { class: "sub" }, `${s.source} · session ${s.key} · ${when(s.started_at)} · ${s.total} turns`),
        s.project ? h("div", { class: "sub", id: "session-project" }, `${s.client || "agent"} in `, h("span", { class: "mono" }, s.project.cwd),
          s.project.branch ? ` · branch ${s.project.branch}` : "") : null,
        h("div", { class: "chips" }, s.topics.map((p) => h("span", { class: "chip topic", title: p.summary }, p.label)))),
      h("button", { class: "ghost-danger", id: "forget-session", onclick: () =>
        forgetPreviewed({ session: s.session_id }, `session ${s.key} (${s.total} turns)`, "#/timeline") }, "Forget session…")),
    windowLink(`↑ earlier turns (1–${s.offset})`, s.previous, "session-earlier"),
    h("div", { class: "turns", id: "session-turns" }, s.turns.map((x) => h("div", { class: x.turn_id === s.focus ? "turn focus" : "turn", "data-turn": x.turn_id },
      h("span", { class: "sub mono" }, when(x.timestamp)), h("span", { class: "who" }, x.speaker || x.role),
      h("span", { class: "text" }, x.text), h("span", {}, turnLink(x.turn_id))))),
    windowLink(`↓ later turns (from ${s.next + 1} of ${s.total})`, s.next, "session-later")));
  const focus = s.focus !== null ? main.querySelector(`#session-turns [data-turn="${s.focus}"]`) : null;
  if (focus) focus.scrollIntoView({ block: "center" });
}
