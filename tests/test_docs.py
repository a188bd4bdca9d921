"""Docs that tests check, as sqlite-utils does (its tests/test_docs.py): every module in
docs/architecture.md's package layout, every storage room's docstring true to its import
contract, every command in docs/cli.md with help text, every MCP tool in docs/mcp.md,
every source path the docs name on disk, and the README short (a user's first ten
minutes; details live in docs/)."""

from __future__ import annotations

import argparse
import ast
import json
import re
import tomllib
from pathlib import Path

import pytest

from localmem.cli import full_parser
from tests.helpers.cli import run

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
STORAGE = ROOT / "localmem" / "storage"
README_MAX_BYTES = 12 * 1024

# Paths the docs name on purpose although they are not in the tree: the files of an
# experiment built on an unmerged branch, recorded in docs/benchmarks.md.
NOT_IN_TREE = {"localmem/util/preferences.py", "localmem/retrieval/advice.py"}


# -- the package layout -----------------------------------------------------------------


def layout_entries(text: str) -> dict[str, str]:
    """The folders of the fenced block under "## Package layout", each with its text (its
    own line and the more-indented lines under it that open no folder of their own), by
    path: ``localmem/``, ``localmem/storage/engine/``, ``mcp_server/``."""
    section = text.split("## Package layout", 1)[1]
    block = section.split("```", 2)[1]
    entries: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    current = ""
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        first = line.split()[0]
        if first.endswith("/"):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            current = "".join(name for _, name in stack) + first
            stack.append((indent, first))
            entries[current] = line
        elif current:
            entries[current] += " " + line.strip()
    return entries


def modules_missing_from_layout(root: Path = ROOT) -> list[str]:
    """Each module of localmem/ and mcp_server/ that the layout does not name in the
    entry of its own folder (``__init__`` and ``__main__`` shims aside)."""
    entries = layout_entries((root / "docs" / "architecture.md").read_text("utf-8"))
    missing = []
    for package in ("localmem", "mcp_server"):
        for path in sorted((root / package).rglob("*.py")):
            if path.stem.startswith("__"):
                continue
            folder = "".join(f"{part}/" for part in path.relative_to(root).parts[:-1])
            if not re.search(rf"(?<![\w.]){re.escape(path.stem)}(?!\w)", entries.get(folder, "")):
                missing.append(str(path.relative_to(root)))
    return missing


def test_the_package_layout_names_every_module() -> None:
    assert modules_missing_from_layout() == [], "add them to docs/architecture.md#package-layout"


def test_a_module_left_out_of_the_layout_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(
        "## Package layout\n\n```\nlocalmem/   config\n  util/     text, clock\n"
        "             dates\n  storage/\n    engine/   db\nmcp_server/  tools\n```\n",
        "utf-8",
    )
    for name in ("config", "util/text", "util/clock", "util/dates", "util/heap", "storage/engine/db"):
        (tmp_path / "localmem" / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "localmem" / f"{name}.py").write_text("", "utf-8")
    (tmp_path / "localmem" / "storage" / "engine" / "text.py").write_text("", "utf-8")  # named, but for util/
    (tmp_path / "mcp_server").mkdir()
    (tmp_path / "mcp_server" / "tools.py").write_text("", "utf-8")
    (tmp_path / "mcp_server" / "__main__.py").write_text("", "utf-8")
    assert modules_missing_from_layout(tmp_path) == ["localmem/storage/engine/text.py", "localmem/util/heap.py"]


def test_every_source_path_the_docs_name_exists() -> None:
    named = {
        (doc.name, path)
        for doc in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
        for path in re.findall(
            r"\b(?:localmem|mcp_server|tests|migrations)/[\w/]+\.(?:py|sql)\b", doc.read_text("utf-8")
        )
    }
    assert sorted((doc, p) for doc, p in named if p not in NOT_IN_TREE and not (ROOT / p).exists()) == []


# -- storage rooms and their contracts ---------------------------------------------------


def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def rooms() -> list[str]:
    return sorted(p.name for p in STORAGE.iterdir() if (p / "__init__.py").is_file())


def room_layers() -> list[set[str]]:
    """The storage-rooms contract's layers, top first, each a set of sibling rooms."""
    layers = _contracts()["storage-rooms"]["layers"]
    assert isinstance(layers, list)
    return [{name.strip() for name in str(layer).split("|")} for layer in layers]


def below(room: str) -> set[str]:
    """The rooms the contract lets ``room`` import: those in the layers under its own."""
    layers = room_layers()
    at = next(i for i, layer in enumerate(layers) if room in layer)
    return set().union(*layers[at + 1 :])


def imported_rooms(room: str) -> set[str]:
    """The other rooms ``room``'s modules import, at any depth of the code."""
    out: set[str] = set()
    for path in (STORAGE / room).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["localmem", "storage"]:
                    out |= {parts[2]} if len(parts) > 2 else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("localmem.storage.")}
    return out - {room}


def docstring(path: Path) -> str:
    return " ".join((ast.get_docstring(ast.parse(path.read_text("utf-8"))) or "").split())


def says_it_imports(doc: str) -> tuple[set[str], set[str]]:
    """From a room's docstring, the rooms its "Imports ..." sentence names, and those it
    says it never imports (after "never" in that sentence). A sentence that starts with
    "Imports" (or has it after a colon) is that sentence; "who uses it" parts after
    "used by" name packages, not rooms."""
    sentence = next(
        (m.group(1) for s in re.split(r"\.\s+", doc) if (m := re.search(r"(?:^|:\s*)[Ii]mports\b(.*)$", s))), None
    )
    assert sentence is not None, f"no 'Imports ...' sentence in {doc[:60]!r}"
    sentence = re.split(r"\b[Uu]sed by\b", sentence)[0]
    yes, _, no = sentence.partition("never")

    def named(text: str) -> set[str]:
        return {m.removeprefix("storage.") for m in re.findall(r"``([\w.]+)``", text)} & set(rooms())

    return named(yes), named(no)


def only_importers(doc: str) -> set[str]:
    """The packages a docstring says are the only ones to import it."""
    return set(re.findall(r"[Oo]nly ``(localmem\.[\w.]+)`` imports it", doc))


def test_storage_rooms_are_the_contracts_rooms() -> None:
    assert set().union(*room_layers()) == set(rooms())
    listed = docstring(STORAGE / "__init__.py")
    assert [r for r in rooms() if f"``{r}``" not in listed] == [], "storage/__init__ lists every room"


def test_each_room_docstring_agrees_with_its_contract() -> None:
    """What a room's docstring says it imports is allowed by the storage-rooms contract
    and covers what it does import; what it says it never imports, it does not; and it
    names its only importers exactly when a protected contract does."""
    protected = {
        str(c["protected_modules"][0]).rpartition(".")[2]: set(c["allowed_importers"])  # type: ignore[index, call-overload]
        for c in _contracts().values()
        if c["type"] == "protected" and str(c["protected_modules"][0]).startswith("localmem.storage.")  # type: ignore[index]
    }
    for room in rooms():
        doc = docstring(STORAGE / room / "__init__.py")
        says, never = says_it_imports(doc)
        actual = imported_rooms(room)
        assert says <= below(room), f"storage.{room} says it imports {says - below(room)}; its contract forbids it"
        assert actual <= says, f"storage.{room} imports {actual - says} and its docstring does not say so"
        assert not actual & never, f"storage.{room} imports {actual & never}, which its docstring says it never does"
        assert only_importers(doc) == protected.get(room, set()), f"storage.{room}: who may import it"


def test_the_docstring_parser_reads_the_room_sentences() -> None:
    doc = docstring(STORAGE / "write" / "__init__.py")
    assert says_it_imports("The bottom room: imports nothing else of storage. Anything may import it.") == (
        set(),
        set(),
    )
    assert says_it_imports("Imports ``write``, ``vectors`` and ``engine``; used by ``localmem.bench``.") == (
        {"write", "vectors", "engine"},
        set(),
    )
    assert says_it_imports(doc)[1] >= {"layers", "bench"}
    assert only_importers("Only ``localmem.sync`` imports it (a contract in pyproject.toml).") == {"localmem.sync"}


# -- the command line and the MCP tools ------------------------------------------------------


def commands() -> list[tuple[str, str | None, argparse.ArgumentParser]]:
    """Every ``localmem`` command and subcommand: (path, help text, parser)."""
    out = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, sub in action.choices.items():
                    out.append((f"{path} {name}", helps.get(name), sub))
                    walk(sub, f"{path} {name}")

    walk(full_parser(), "localmem")  # every command's own parser loaded (the CLI loads them lazily)
    return out


def test_every_command_has_help() -> None:
    assert [path for path, helptext, _ in commands() if not helptext] == []
    out = run("--help").stdout
    for name in ("ingest", "query", "stats", "doctor", "bench", "forget", "demo"):
        assert name in out


def test_every_command_is_in_docs_cli() -> None:
    """docs/cli.md has a row (or line) starting `` `localmem COMMAND`` for every command
    and subcommand."""
    text = (DOCS / "cli.md").read_text("utf-8")
    assert [path for path, _, _ in commands() if not re.search(rf"`{re.escape(path)}[` ]", text)] == []


def test_every_mcp_tool_is_in_docs_mcp() -> None:
    tools = {t["name"] for t in json.loads((ROOT / "tests" / "data" / "mcp_tools.json").read_text("utf-8"))}
    text = (DOCS / "mcp.md").read_text("utf-8")
    assert tools and sorted(t for t in tools | {"answer"} if f"| `{t}` |" not in text) == []


# -- the README -----------------------------------------------------------------------------


def test_the_readme_is_a_first_ten_minutes() -> None:
    """At most 12 KB; its first two commands are the quick start, and the second is the
    test command CI runs verbatim on a clean clone."""
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.encode("utf-8")) <= README_MAX_BYTES, "move details into docs/"
    blocks = re.findall(r"```sh\n(.*?)\n```", text, flags=re.DOTALL)
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert blocks[0] in quick and blocks[1] in quick
    assert blocks[0].startswith("python3 -m venv .venv") and blocks[0].endswith("localmem demo")
    assert blocks[1] in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()


def test_the_readme_python_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's Python example, as written, on the default embedder in a fresh folder."""
    (code,) = re.findall(r"```python\n(.*?)\n```", (ROOT / "README.md").read_text("utf-8"), flags=re.DOTALL)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert "I moved to Porto in May." in capsys.readouterr().out and (tmp_path / "memory.db").is_file()


# -- docs/capture.md and docs/ui.md against the hooks and the web view (#50 item 3) ---------------------


def _hook_table() -> dict[str, dict[str, str]]:
    """docs/capture.md's table of hook events: localmem event -> client -> the cell."""
    text = (DOCS / "capture.md").read_text("utf-8")
    head = "| event | Claude Code | Codex CLI | Gemini CLI |"
    lines = text[text.index(head) :].splitlines()
    rows: dict[str, dict[str, str]] = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        clients = ("claude-code", "codex", "gemini", "copilot", "cursor", "opencode")
        rows[cells[0]] = dict(zip(clients, cells[1:7], strict=True))
    return rows


def test_the_hook_events_capture_md_names_are_the_ones_install_writes(tmp_path: Path) -> None:
    from localmem.hooks import install
    from localmem.hooks.events import CLIENT_EVENTS, CLIENTS, EVENTS

    table = _hook_table()
    assert list(table) == list(EVENTS)
    for client in CLIENTS:
        target = tmp_path / client / ("localmem.js" if client == "opencode" else "settings.json")
        install.install(tmp_path / "m.db", client, target)
        if client == "opencode":  # its plugin file: what it runs each command on (hooks.events)
            written = {CLIENT_EVENTS[client][e] for e in install.inspect(client, target).events}
        else:
            written = set(json.loads(target.read_text("utf-8"))["hooks"])
        for event in EVENTS:
            cell = table[event][client]
            if event in CLIENT_EVENTS[client]:
                assert cell == f"`{CLIENT_EVENTS[client][event]}`" and cell.strip("`") in written, (client, event)
            else:
                assert cell.startswith("none"), (client, event, cell)
    assert set(install.TIMEOUTS) == set(EVENTS)


def test_capture_md_names_codex_s_feature_key_as_install_reads_it(tmp_path: Path) -> None:
    from localmem.hooks import install

    text = " ".join((DOCS / "capture.md").read_text("utf-8").split())
    assert "`[features] hooks`" in text and "`codex_hooks`, the older name" in text
    for key in ("hooks", "codex_hooks"):
        (tmp_path / "config.toml").write_text(f"[features]\n{key} = false\n", "utf-8")
        assert install._codex_features(tmp_path / "config.toml") == [
            f"hooks are turned off in {tmp_path / 'config.toml'} ([features] {key} = false): turn them on for these to run"
        ]
    (tmp_path / "config.toml").write_text("[features]\nhooks = true\ncodex_hooks = false\n", "utf-8")
    assert install._codex_features(tmp_path / "config.toml") == []  # the canonical key wins
    # the trust words status prints are the ones the docs list
    for word in ("trusted", "not trusted", "changed since trusted", "turned off", "unknown"):
        assert f"`{word}`" in text


def test_every_hook_failure_kind_is_in_capture_md() -> None:
    from localmem.hooks import status

    text = (DOCS / "capture.md").read_text("utf-8")
    listed = text[text.index("counted and named, to `<db>-hooks.json`") :][:1200]
    assert [k for k in status.KINDS if f"`{k}`" not in listed] == []


def test_ui_md_says_what_token_does_as_the_gate_does() -> None:
    """`?token=` is documented where the gate reads it from the query, and as what it does
    there: a 303 to the URL without it, setting the cookie (tests/ui/test_ui.py runs it)."""
    gate = (ROOT / "localmem" / "ui" / "security.py").read_text("utf-8")
    text = " ".join((DOCS / "ui.md").read_text("utf-8").split())
    reads_query = 'query.get("token")' in gate
    assert ("?token=" in text) == reads_query
    assert "answered `303` to the same URL without it, setting the cookie" in text
    assert "`X-Localmem-Token`" in text and 'HEADER = "x-localmem-token"' in gate
    # the recall log: the hooks write it (resident.recall), and ui.md says so
    recall = (ROOT / "localmem" / "resident" / "recall.py").read_text("utf-8")
    assert 'client = f"hook:{ask.agent}"' in recall and "recalls.log(" in recall
    assert "do not write to it yet" not in text and "`hook:claude-code`" in text
