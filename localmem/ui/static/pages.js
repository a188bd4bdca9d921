// localmem web view: the Health page and the Injected page (the recall log).
"use strict";

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


// --- Injected: the recall log ------------------------------------------------------------
async function injectedPage(params) {
  const client = params.get("client") || "";
  const offset = Number(params.get("offset") || 0);
  const r = await api(`/api/recalls?${new URLSearchParams({ client, offset })}`);
  const pick = h("select", { id: "injected-client", onchange: (e) => go("#/injected", { client: e.target.value }) },
    h("option", { value: "" }, "every client"), r.clients.map((c) => h("option", { value: c.client }, `${c.client} · ${c.calls}`)));
  pick.value = client;
  const clear = h("button", { class: "ghost-danger", id: "injected-clear", onclick: async () => {
    if (!(await confirmDialog(`Delete all ${r.total} calls of the recall log? The turns stay; only the record of what was handed to clients goes.`, "Clear the log", "Clear the recall log?"))) return;
    try { const x = await post("/api/recalls/clear", {}); toast(`Cleared ${x.cleared} call(s).`); route(); } catch (err) { toast(err.message); }
  } }, "Clear the log…");
  const rows = r.calls.map((c) => h("tr", { class: "call-row", "data-call": c.call_id, onclick: () => { location.hash = `#/injected/${c.call_id}`; } },
    h("td", { class: "sub mono" }, when(c.at)), h("td", {}, badge("client", c.client)), h("td", {}, c.tool),
    h("td", { class: "snippet" }, clip(c.query, 160), c.session || c.project ? h("div", { class: "why" }, [c.project, c.session].filter(Boolean).join(" · ")) : null),
    h("td", { class: "num" }, c.kept), h("td", { class: "num" }, c.forgotten || ""), h("td", { class: "num" }, c.tokens)));
  const pager = h("div", { class: "pager" },
    offset > 0 ? h("a", { href: `#/injected?${new URLSearchParams({ client, offset: Math.max(0, offset - r.limit) })}`, id: "injected-newer" }, "← newer") : null,
    h("span", { class: "sub" }, `${offset + 1}–${offset + r.calls.length} of ${r.total}`),
    r.next !== null ? h("a", { href: `#/injected?${new URLSearchParams({ client, offset: r.next })}`, id: "injected-older" }, "older →") : null);
  show(h("div", { class: "head-row" }, h("div", {}, h("h1", {}, "Injected"),
    h("p", { class: "sub" }, `What each reconstruct made for a client handed it, newest first: MCP reconstruct and answer, localmem query, agent hooks. `,
      `The newest ${r.keep} calls are kept (setting recall_log; 0 keeps none), on this device only: never synced or exported. Times are UTC.`)),
  h("div", { class: "actions" }, pick, r.total ? clear : null)),
  r.calls.length ? h("div", { class: "panel" }, h("table", { id: "calls" },
    h("thead", {}, h("tr", {}, ["when", "client", "tool", "query", "turns", "forgotten since", "tokens"].map((x) => h("th", {}, x)))),
    h("tbody", {}, rows)), pager) : h("div", { class: "panel empty" }, "No calls recorded yet: they appear when a client calls reconstruct."));
}

async function injectedCall(id) {
  const c = await api(`/api/recalls/${id}`);
  show(h("div", { class: "panel" },
    h("h1", {}, `${c.client} · ${c.tool}`),
    h("div", { class: "sub" }, `${when(c.at)} UTC · ${c.tokens} of ${c.budget} tokens · ${c.turns} turns handed`,
      c.forgotten ? ` (${c.forgotten} forgotten since)` : "", c.as_of ? ` · as of ${c.as_of}` : "", c.scope ? ` · scope ${c.scope}` : "",
      c.project ? ` · project ${c.project}` : "", c.session ? ` · session ${c.session}` : ""),
    h("pre", { class: "context", id: "call-query" }, c.query),
    h("p", {}, h("a", { href: `#/ask?${new URLSearchParams({ q: c.query, budget: c.budget, as_of: c.as_of || "", scope: c.scope || "" })}` }, "Ask it again, with the trace →"))),
  h("div", { class: "panel" }, h("h2", {}, "Handed, in the order of the context"),
    c.handed.length ? h("table", { id: "handed" },
      h("thead", {}, h("tr", {}, ["#", "turn", "reason", "text", "score"].map((x) => h("th", {}, x)))),
      h("tbody", {}, c.handed.map((t) => h("tr", { "data-turn": t.turn_id, "data-reason": t.reason },
        h("td", { class: "num" }, t.place), h("td", {}, turnLink(t.turn_id)), h("td", {}, badge(`reason-${t.reason}`, t.reason)),
        h("td", { class: "snippet" }, h("b", {}, t.speaker ? `${t.speaker}: ` : ""), t.text, t.why ? h("div", { class: "why" }, t.why) : null,
          h("div", { class: "sub" }, h("a", { href: `#/session/${t.session_id}?turn=${t.turn_id}` }, `${t.session} · ${when(t.timestamp)}`))),
        h("td", { class: "num" }, fmt(t.score, 4))))))
      : h("p", { class: "empty" }, "Every turn it handed has been forgotten since.")));
}
