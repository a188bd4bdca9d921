"""The memory browser in a real headless Chromium: Find (search, filters, pages, each result
opening its session at the turn), the Timeline of every session with counts per month,
forget with a preview (a turn, a session, ticked results, a date range), redacting a
span, the Injected page, and hostile turn text shown as text on every page.

Stores: the story (worker run with a scripted model) and a "lifetime" of 131 sessions over
14 months (more than two timeline pages); HashEmbedder. ``LOCALMEM_UI_SHOTS=DIR`` saves the
screenshots there too (docs/ui.md's come from ``localmem bench ui --shots``, on the 29k-turn
store).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localmem.config import Settings
from localmem.records import Project, SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.layers import recalls
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
from tests.helpers.ui import (
    HOSTILE,
    Server,
    build_lifetime,
    build_store,
    console_errors,
    count,
    login,
    select_text,
    shot,
    turn_id,
    until,
    wait_for,
)


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(build_lifetime(tmp_path_factory.mktemp("life") / "life.db"))
    yield srv
    srv.stop()


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def result_ids(driver: Any) -> list[int]:
    return [int(r.get_attribute("data-turn")) for r in css(driver, "#results .result")]


def test_find_searches_filters_pages_and_opens_in_context(
    browser: Any, server: Server, built: Settings, tmp_path: Path
) -> None:
    login(browser, server)
    browser.find_element("css selector", 'header nav a[data-page="find"]').click()
    box = wait_for(browser, "#find-q")
    box.send_keys("Lisbon tram")
    browser.find_element("css selector", "#find-go").click()
    until(browser, lambda d: "Lisbon tram" in d.find_element("css selector", "#find-summary").text)
    first = css(browser, "#results .result")[0]
    assert "Lisbon" in first.text and "tram" in first.text  # both words: every list agrees
    assert {m.text.lower() for m in first.find_elements("css selector", "mark.hit")} >= {"lisbon", "tram"}
    assert first.find_elements("css selector", ".match-words")
    # a query word is marked where a word starts, never inside another word
    parts = "return marked('programs and RAM, ram-disk', ['ram']).map(p => typeof p === 'string' ? p : '<' + p.textContent + '>')"
    assert "".join(browser.execute_script(parts)) == "programs and <RAM>, <ram>-disk"
    shot(browser, "find", tmp_path)
    assert console_errors(browser) == []
    # a filter narrows the read path's lists themselves
    browser.find_element("css selector", "#f-speaker option[value='Sam']").click()
    browser.find_element("css selector", "#find-go").click()
    until(browser, lambda d: "speaker=Sam" in d.current_url)

    def speakers(d: Any) -> set[str]:
        return {r.find_element("css selector", ".result-head b").text for r in css(d, "#results .result")}

    until(browser, lambda d: speakers(d) == {"Sam"})  # every result (the old page's are gone)
    # a result opens its session, scrolled to the turn and marked
    target = result_ids(browser)[0]
    css(browser, "#results .result a.result-text")[0].click()
    focus = wait_for(browser, "#session-turns .turn.focus")
    assert int(focus.get_attribute("data-turn")) == target
    assert browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight;", focus
    )
    # no words: every turn the filters let through, newest first, a page at a time
    browser.get(f"{server.base}/#/find?start=2024-04-01&end=2024-05-14")
    until(browser, lambda d: "newest first" in d.find_element("css selector", "#find-summary").text)
    assert "12 turns match the filters" in browser.find_element("css selector", "#find-summary").text
    assert browser.find_element("css selector", "#forget-filter").text == "Forget all 12 matching…"
    assert turn_id(built, "bike-again:2") == result_ids(browser)[0]


def test_find_pages_through_a_long_result_list(browser: Any, life: Server) -> None:
    login(browser, life)
    browser.get(f"{life.base}/#/find?q=garden%20tomatoes")
    until(browser, lambda d: d.find_element("css selector", "#page-at").text.startswith("page 1 of "))
    seen = result_ids(browser)
    assert len(seen) == 20
    browser.find_element("css selector", "#page-next").click()
    until(browser, lambda d: d.find_element("css selector", "#page-at").text.startswith("page 2 "))
    second = result_ids(browser)
    assert len(second) == 20 and not set(second) & set(seen)
    browser.find_element("css selector", "#page-prev").click()
    until(browser, lambda d: d.find_element("css selector", "#page-at").text.startswith("page 1 "))
    assert result_ids(browser) == seen
    # words only: the lexical lists; the role filter keeps the assistant's turns out
    browser.get(f"{life.base}/#/find?q=repaired%20bike&match=words&role=user")
    until(browser, lambda d: css(d, "#results .result"))
    assert all(r.find_elements("css selector", ".match-words") for r in css(browser, "#results .result"))
    assert all("repaired bike" in r.text for r in css(browser, "#results .result"))


def test_timeline_reaches_every_session_with_counts_per_month(browser: Any, life: Server, tmp_path: Path) -> None:
    login(browser, life)
    browser.find_element("css selector", 'header nav a[data-page="timeline"]').click()
    months = until(browser, lambda d: css(d, "#months a[data-month]"))
    counts = {m.get_attribute("data-month"): int(m.find_elements("css selector", "span")[1].text) for m in months}
    assert sum(counts.values()) == 131 and len(counts) == 15  # 14 months, and the hostile session
    assert list(counts) == sorted(counts, reverse=True)
    shot(browser, "timeline", tmp_path)
    assert console_errors(browser) == []
    assert len(css(browser, "a.session-card")) == 50  # one page; scrolling down loads the next
    for _ in range(10):
        if len(css(browser, "a.session-card")) == 131:
            break
        browser.execute_script("document.getElementById('timeline-more').scrollIntoView()")
        until(browser, lambda d: len(css(d, "a.session-card")) > 50)
    cards = [c.get_attribute("data-session") for c in css(browser, "a.session-card")]
    assert len(cards) == len(set(cards)) == 131  # every session, once
    days = [d.get_attribute("data-day") for d in css(browser, "section.day")]
    assert days == sorted(days, reverse=True)
    assert not browser.find_element("css selector", "#timeline-more").is_displayed()
    # a month jumps to its first session
    month = list(counts)[6]
    browser.find_element("css selector", f'#months a[data-month="{month}"]').click()
    until(browser, lambda d: "offset=" in d.current_url)
    until(browser, lambda d: d.find_element("css selector", "section.day").get_attribute("data-day")[:7] == month)
    assert browser.find_element("css selector", f'#months a[data-month="{month}"]').get_attribute("class") == "active"


def test_forget_with_a_preview(browser: Any, tmp_path: Path) -> None:
    settings = build_store(tmp_path / "forget.db")
    srv = Server(settings)
    try:
        login(browser, srv)
        # a turn: the preview counts what goes with it; Cancel keeps everything
        target = turn_id(settings, "balcony:1")
        cues = count(settings, "SELECT count(*) FROM cues WHERE turn_id = ?", target)
        browser.get(f"{srv.base}/#/turn/{target}")
        wait_for(browser, "#forget-turn").click()
        counts = wait_for(browser, "#preview-counts")
        assert "1" in counts.find_element("css selector", 'tr[data-count="turns"] td').text
        assert f"{cues - 1} statement" in counts.text or f"{cues} statement" in counts.text
        assert "There is no undo" in browser.find_element("css selector", "#preview-undo").text
        dialog = browser.find_element("css selector", "#forget-dialog").text
        assert "other devices" in dialog and "null" not in dialog and "undefined" not in dialog
        shot(browser, "forget", tmp_path)
        browser.find_element("css selector", "#forget-cancel").click()
        until(browser, lambda d: not d.find_element("css selector", "#forget-dialog").is_displayed())
        assert count(settings, "SELECT count(*) FROM turns WHERE id = ?", target) == 1
        browser.find_element("css selector", "#forget-turn").click()
        wait_for(browser, "#forget-ok").click()
        until(browser, lambda d: "#/session/" in d.current_url)
        wait_for(browser, "#session-turns")
        assert count(settings, "SELECT count(*) FROM turns WHERE id = ?", target) == 0
        assert count(settings, "SELECT count(*) FROM cues WHERE turn_id = ?", target) == 0
        assert count(settings, "SELECT count(*) FROM changes WHERE kind = 'forget'") == 1

        # ticked search results
        browser.get(f"{srv.base}/#/find?q=bike%20chain&match=words")
        boxes = until(browser, lambda d: css(d, "#results input.pick"))
        ids = [int(b.get_attribute("data-turn")) for b in boxes[:2]]
        for b in boxes[:2]:
            b.click()
        assert browser.find_element("css selector", "#picked-count").text == "2"
        browser.find_element("css selector", "#forget-picked").click()
        wait_for(browser, "#preview-sample")
        shown = {int(li.get_attribute("data-turn")) for li in css(browser, "#preview-sample li")}
        assert shown == set(ids)
        browser.find_element("css selector", "#forget-ok").click()
        until(browser, lambda d: not set(ids) & set(result_ids(d)))
        assert count(settings, f"SELECT count(*) FROM turns WHERE id IN ({ids[0]}, {ids[1]})") == 0

        # a date range: every turn of March, whole sessions with them
        browser.get(f"{srv.base}/#/find?end=2024-03-31")
        wait_for(browser, "#forget-filter").click()
        wait_for(browser, "#preview-counts")
        assert "6" in browser.find_element("css selector", 'tr[data-count="turns"] td').text
        assert "2 deleted" in browser.find_element("css selector", 'tr[data-count="sessions"] td').text
        browser.find_element("css selector", "#forget-ok").click()
        until(browser, lambda d: "Nothing found" in d.find_element("css selector", "main").text)
        assert count(settings, "SELECT count(*) FROM turns WHERE ts < '2024-04-01'") == 0
        assert count(settings, "SELECT count(*) FROM sessions WHERE key IN ('trip-plans', 'apartment')") == 0

        # a session, from its page
        sid = count(settings, "SELECT id FROM sessions WHERE key = 'deadline'")
        browser.get(f"{srv.base}/#/session/{sid}")
        wait_for(browser, "#forget-session").click()
        wait_for(browser, "#forget-ok").click()
        wait_for(browser, 'a.session-card[data-session="back-home"]')
        assert count(settings, "SELECT count(*) FROM sessions WHERE key = 'deadline'") == 0
        forgets = count(settings, "SELECT count(*) FROM changes WHERE kind = 'forget'")
        assert forgets == count(settings, "SELECT count(*) FROM forgotten") == 1 + 2 + 6 + 3
        assert console_errors(browser) == []
    finally:
        srv.stop()


def test_redact_a_span_in_place(browser: Any, tmp_path: Path) -> None:
    settings = build_store(tmp_path / "redact.db")
    srv = Server(settings)
    try:
        login(browser, srv)
        old = turn_id(settings, "trip-plans:0")
        browser.get(f"{srv.base}/#/turn/{old}")
        wait_for(browser, "#turn-text")
        browser.find_element("css selector", "#redact").click()  # nothing selected: it says so
        until(browser, lambda d: "Select the part" in d.find_element("css selector", "#toast").text)
        assert select_text(browser, "#turn-text", "second week")
        browser.find_element("css selector", "#redact").click()
        assert "second week" in wait_for(browser, "#confirm-text").text
        browser.find_element("css selector", "#confirm-ok").click()
        redacted = "I booked flights to Lisbon for the [secret: manual] of May."
        until(browser, lambda d: d.find_element("css selector", "#turn-text").text == redacted)  # the new turn's page
        new = int(browser.current_url.rsplit("/", 1)[1])
        with Store(settings.db, embedder=HashEmbedder(), settings=settings) as s:
            assert s.conn.execute("SELECT text FROM turns WHERE text LIKE '%second week%'").fetchall() == []
            assert s.conn.execute("SELECT ord FROM turns WHERE id = ?", (new,)).fetchone()[0] == 0
            kinds = [r[0] for r in s.conn.execute("SELECT kind FROM changes ORDER BY seq DESC LIMIT 2")]
            assert kinds == ["forget", "turn"]
        browser.find_element("css selector", "#in-context").click()
        focus = wait_for(browser, "#session-turns .turn.focus")
        assert "[secret: manual]" in focus.text and int(focus.get_attribute("data-turn")) == new
        # offsets count characters as the server does: emoji before the span move nothing
        with Store(settings.db, embedder=HashEmbedder(), settings=settings) as s:
            party = s.write([TurnIn("Party 🎉🎉 at 8, door code 4417, bring snacks", "Maya")], "party").turn_ids[0]
        browser.get(f"{srv.base}/#/turn/{party}")
        wait_for(browser, "#turn-text")
        assert select_text(browser, "#turn-text", "4417")
        browser.find_element("css selector", "#redact").click()
        wait_for(browser, "#confirm-ok").click()
        done = "Party 🎉🎉 at 8, door code [secret: manual], bring snacks"
        until(browser, lambda d: d.find_element("css selector", "#turn-text").text == done)
        assert f"#/turn/{party}" not in browser.current_url
        assert console_errors(browser) == []
    finally:
        srv.stop()


def test_injected_lists_what_each_call_handed(browser: Any, built: Settings, server: Server, tmp_path: Path) -> None:
    with Store(built.db, embedder=HashEmbedder(), settings=built) as s:
        for client, q in (("mcp:claude-desktop", "Who is going to Lisbon with Maya?"), ("cli", "bike repair shop")):
            ctx = reconstruct(s, q, 150)
            recalls.log(s.conn, recalls.from_context(ctx, client, "reconstruct"), keep=100)
        last = int(s.conn.one("SELECT max(id) FROM recall_calls")[0])
        handed = [
            r[0]
            for r in s.conn.execute("SELECT turn_id FROM recall_turns WHERE call_id = ? ORDER BY place", (last - 1,))
        ]
    login(browser, server)
    browser.find_element("css selector", 'header nav a[data-page="injected"]').click()
    rows = until(browser, lambda d: css(d, "#calls tr.call-row"))
    assert "bike repair shop" in rows[0].text and "cli" in rows[0].text  # newest first
    assert "mcp:claude-desktop" in rows[1].text
    rows[1].click()
    table = wait_for(browser, "#handed")
    assert [int(r.get_attribute("data-turn")) for r in table.find_elements("css selector", "tbody tr")] == handed
    assert {r.get_attribute("data-reason") for r in table.find_elements("css selector", "tbody tr")} <= {
        "anchor",
        "temporal",
        "semantic",
        "extracted",
        "antecedent",
    }
    shot(browser, "injected", tmp_path)
    # a turn's page says which queries recalled it
    browser.get(f"{server.base}/#/turn/{handed[0]}")
    recalled = wait_for(browser, "#recalls")
    assert "Who is going to Lisbon with Maya?" in recalled.text and "mcp:claude-desktop" in recalled.text
    assert console_errors(browser) == []


def test_hostile_text_is_only_ever_text(browser: Any, life: Server) -> None:
    with Store(life.settings.db, embedder=HashEmbedder(), settings=life.settings) as s:
        ctx = reconstruct(s, HOSTILE[0], 300)
        recalls.log(s.conn, recalls.from_context(ctx, "mcp:<b>x</b>", HOSTILE[1]), keep=100)
        sid = int(s.conn.one("SELECT id FROM sessions WHERE key = 'hostile'")[0])
        tid = int(s.conn.one("SELECT min(id) FROM turns WHERE session_id = ?", (sid,))[0])
    login(browser, life)
    pages = [
        ("#/find?q=onerror%20script%20svg", "#results"),
        (f"#/session/{sid}", "#session-turns"),
        (f"#/turn/{tid}", "#turn-text"),
        ("#/timeline?start=2024-03-05&end=2024-03-05", "a.session-card"),
        ("#/injected", "#calls"),
    ]
    for page, ready in pages:
        browser.get(f"{life.base}/{page}")
        wait_for(browser, ready)
        main = browser.find_element("css selector", "main")
        assert not main.find_elements("css selector", "img, script, svg:not(.graph)"), page
        assert "<img src=x" in main.text or "<script>" in main.text or "mcp:<b>x</b>" in main.text, page
        assert browser.execute_script("return window.__pwned === undefined"), page


def test_agent_sessions_filter_by_project_and_show_it(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    settings = Settings(db=path)
    with Store(path, embedder=HashEmbedder(), settings=settings) as s:
        for key, client, cwd, text in (
            ("cc-1", "claude-code", "/home/me/code/shop", "I'll run the tests.\nran: pytest -q\nedited: src/cart.py"),
            ("cx-1", "codex", "/home/me/code/blog", "Fixed the feed.\nran: make feed"),
        ):
            s.write(
                SessionIn(
                    key=key,
                    source=client,
                    client=client,
                    project=Project(cwd=cwd, branch="main"),
                    started_at="2024-06-01T10:00:00",
                    turns=(TurnIn("fix it please", "user"), TurnIn(text, "assistant", "assistant")),
                )
            )
        s.write([TurnIn("a chat about tests", "Ana", timestamp="2024-06-02T10:00:00")], "chat", source="chatgpt")
        agent_turn = int(s.conn.one("SELECT id FROM turns WHERE text LIKE 'I''ll run%'")[0])
    srv = Server(settings)
    try:
        login(browser, srv)
        browser.get(f"{srv.base}/#/find")
        until(browser, lambda d: len(css(d, "#f-project option")) > 1)  # the facets arrive after the page
        projects = [o.get_attribute("value") for o in css(browser, "#f-project option")][1:]
        assert projects == ["/home/me/code/blog", "/home/me/code/shop"]
        browser.find_element("css selector", "#f-project option[value='/home/me/code/shop']").click()
        browser.find_element("css selector", "#find-go").click()
        until(browser, lambda d: "2 turns match the filters" in d.find_element("css selector", "#find-summary").text)
        assert {r.get_attribute("data-turn") for r in css(browser, "#results .result")} >= {str(agent_turn)}
        browser.get(f"{srv.base}/#/turn/{agent_turn}")
        project = wait_for(browser, "#turn-project")
        assert "claude-code in /home/me/code/shop" in project.text and "branch main" in project.text
        assert [li.text for li in css(browser, "#tool-lines li")] == ["ran: pytest -q", "edited: src/cart.py"]
        assert console_errors(browser) == []
    finally:
        srv.stop()


class _NoModelLayer:
    """A finder that answers for llama_cpp as an install without the `llm` extra does."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def model_card(driver: Any) -> str:
    """The Health page's model card's value (its label is upper-cased by the style sheet)."""
    for card in css(driver, ".cards .card"):
        if card.find_element("css selector", ".k").text.lower() == "model":
            return str(card.find_element("css selector", ".v").text)
    return ""


def test_health_names_the_model_as_it_is(browser: Any, server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model card says what answers here; with no model layer installed, that none can
    (it named the embedded default model before, which then cannot run)."""
    login(browser, server)
    browser.get(f"{server.base}/#/health")
    text = until(browser, model_card)
    assert "not installed" not in text and ("embedded default" in text or "none:" in text), text
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NoModelLayer(), *sys.meta_path])
    browser.get(f"{server.base}/#/turn/1")  # away and back: the page asks again
    browser.get(f"{server.base}/#/health")
    text = until(browser, lambda d: "not installed" in model_card(d) and model_card(d))
    assert "llama-cpp-python" in text and "embedded default" not in text, text
    assert console_errors(browser) == []
