"""The shape of the tests: folders that mirror the packages, each a package of its own,
and no test module importing another. What several tests share lives in
``tests/helpers/``: a test module that imports another test module runs that module's
tests' fixtures and imports in a place nobody looks, and breaks when it is moved."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SHARED = {"helpers", "agents"}  # folders that test no package: what the tests share; the real agent CLIs

# An import of a test module written inside a string (a subprocess's driver script).
_IN_TEXT = re.compile(r"\b(?:from|import)\s+(tests(?:\.\w+)*)(?:[ \t]+import[ \t]+([\w \t,]+))?")


def _is_test_module(dotted: str) -> bool:
    last = dotted.rpartition(".")[2]
    return dotted.split(".")[0] == "tests" and (last.startswith("test_") or last == "conftest")


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted modules an import statement may load (``from a import b``: ``a.b`` too)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def imports_of_test_modules(root: Path = ROOT) -> list[str]:
    """``path:line imports module`` for every import of a test module (``test_*`` or
    ``conftest``) in ``root/tests``: statements at any depth and, in string constants,
    the scripts a test hands to a subprocess."""
    found: list[tuple[Path, int, str]] = []
    for path in sorted((root / "tests").rglob("*.py")):
        rel = path.relative_to(root)
        package = ".".join(rel.with_suffix("").parts[:-1])
        tree = ast.parse(path.read_text("utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                bad = [t for t in _targets(node, package) if _is_test_module(t)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                bad = []
                for m in _IN_TEXT.finditer(node.value):
                    names = [n.strip() for n in (m.group(2) or "").split(",") if n.strip()]
                    bad += [t for t in [m.group(1), *(f"{m.group(1)}.{n}" for n in names)] if _is_test_module(t)]
            else:
                continue
            found += [(rel, node.lineno, t) for t in bad]
    return [f"{rel}:{line} imports {t}" for rel, line, t in sorted(found)]


def test_no_test_module_imports_another() -> None:
    assert imports_of_test_modules() == [], "move what they share into tests/helpers/"


def test_the_finder_finds_planted_imports(tmp_path: Path) -> None:
    (tmp_path / "tests" / "ingest").mkdir(parents=True)
    (tmp_path / "tests" / "helpers").mkdir()
    b, cli = "tests.ingest.test_b", "tests.cli.test_cli"  # spelled apart: this file's own text stays clean
    plant = {
        "tests/ingest/test_a.py": f"from {b} import driver\nfrom tests.helpers.cli import run\n",
        "tests/ingest/test_c.py": f"def f():\n    from tests.ingest import {b[13:]}\n    from . import {b[13:]} as b\n",
        "tests/ingest/test_d.py": f'SCRIPT = """\nimport sys\nfrom {cli} import run\n"""\n',
        "tests/helpers/fine.py": 'from tests.helpers.fakes import HashEmbedder\nS = "from tests.helpers.cli import ROOT"\n',
    }
    for name, text in plant.items():
        (tmp_path / name).write_text(text, "utf-8")
    assert imports_of_test_modules(tmp_path) == [
        "tests/ingest/test_a.py:1 imports tests.ingest.test_b",
        "tests/ingest/test_c.py:2 imports tests.ingest.test_b",
        "tests/ingest/test_c.py:3 imports tests.ingest.test_b",
        "tests/ingest/test_d.py:1 imports tests.cli.test_cli",
    ]


def test_test_folders_mirror_the_packages() -> None:
    """Each folder of tests with Python in it is a package (``__init__.py``) named after a
    package of localmem (or ``mcp_server``), or is one of the shared folders."""
    packages = {p.name for p in (ROOT / "localmem").iterdir() if (p / "__init__.py").is_file()} | {"mcp_server"}
    for folder in sorted(p for p in TESTS.iterdir() if p.is_dir() and any(p.rglob("*.py"))):
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)} has no __init__.py"
        assert folder.name in packages | SHARED, f"tests/{folder.name} mirrors no package of localmem"
