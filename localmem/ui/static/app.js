// localmem web view: the hash router over the pages (core.js and the page scripts load first).
"use strict";

async function route() {
  const [path, query] = (location.hash.slice(1) || "/ask").split("?");
  const parts = path.split("/").filter(Boolean);
  const page = parts[0] || "ask";
  const params = new URLSearchParams(query || "");
  const tab = { session: "timeline", turn: "find" }[page] || page;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.page === tab);
  window.scrollTo(0, 0);  // a new page starts at its top (a session then scrolls to its turn)
  try {
    if (page === "ask") askPage(params);
    else if (page === "find") await findPage(params);
    else if (page === "timeline") await timelinePage(params);
    else if (page === "session") await sessionPage(Number(parts[1]), params);
    else if (page === "turn") await turnPage(Number(parts[1]));
    else if (page === "injected" && parts[1]) await injectedCall(Number(parts[1]));
    else if (page === "injected") await injectedPage(params);
    else if (page === "health") await healthPage();
    else show(h("p", { class: "empty" }, "No such page."));
    main.dataset.page = page;
  } catch (err) { fail(err); }
}
window.addEventListener("hashchange", route);
api("/api/health").then((x) => { document.getElementById("db-path").textContent = x.db; }, () => {});
route();
