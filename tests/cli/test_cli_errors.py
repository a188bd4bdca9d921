"""No argument ends in a traceback: a hypothesis pass over the CLI (in process, through
``localmem.cli.main``) with odd values for every option of the commands that neither
block (watch, serve, ui, worker) nor need a chat model: each run returns an exit code;
a failure is one ``localmem: error:`` line (or argparse's usage error). The cases the
issue names run once more as real subprocesses."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import localmem.models.registry
from localmem.cli import main
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    d = tmp_path_factory.mktemp("cli")
    paths = {
        "good": d / "m.db",
        "log": d / "log.jsonl",
        "notdb": d / "notdb.db",
        "empty": d / "empty.db",
        "folder": d / "folder",
        "missing": d / "no" / "such" / "m.db",
        "binary": d / "binary.txt",
        "out": d / "out.db",
    }
    paths["log"].write_text('{"speaker": "A", "text": "Hello there."}\n', "utf-8")
    paths["notdb"].write_text("this is not an SQLite file " * 40, "utf-8")
    paths["empty"].write_bytes(b"")
    paths["folder"].mkdir()
    paths["binary"].write_bytes(b"\xff\xfe\x00\x01garbage\n")
    saved = localmem.models.registry.default_embedder
    localmem.models.registry.default_embedder = lambda spec="default": HashEmbedder()  # type: ignore[assignment]
    assert run(["--db", str(paths["good"]), "ingest", str(paths["log"])])[0] == 0
    # Odd values become relative paths (``backup VALUE``): keep them out of the checkout.
    cwd = os.getcwd()
    os.chdir(d)
    try:
        yield {k: str(v) for k, v in paths.items()}
    finally:
        os.chdir(cwd)
        localmem.models.registry.default_embedder = saved


def run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as exc:  # argparse: usage errors and --help
        code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


ODD = st.sampled_from(
    [
        "",
        " ",
        "not a date",
        "-1",
        "0",
        "1e309",
        "nan",
        "99999999999999999999",
        "2024-13-45",
        "\udcff",
        "\ud800",
        "é" * 50,
    ]  # \udcff: a non-UTF-8 byte of a real argv
)
ARGV_TEXT = st.text(st.characters(blacklist_characters="\x00"), max_size=12)  # argv holds no NUL
PLACES = st.sampled_from(["good", "log", "notdb", "empty", "folder", "missing", "binary", "out"])


@st.composite
def argv(draw: st.DrawFn, place: dict[str, str]) -> list[str]:
    value = draw(st.one_of(ODD, PLACES.map(lambda k: place[k]), ARGV_TEXT))
    path = place[draw(PLACES)]
    command = draw(
        st.sampled_from(
            [
                ["stats"],
                ["stats", "--json"],
                ["forget", "--before", value],
                ["forget", "--turn", value],
                ["forget", "--turn", "99999999999999999999"],
                ["forget", "--session", value],
                ["query", value],
                ["query", "hi", "--budget", value],
                ["query", "hi", "--as-of", value],
                ["query", "hi", "--scope", value],
                ["query", "hi", "--cable-tau", value],
                ["query", "--batch", path],
                ["ingest", path],
                ["ingest", path, "--format", draw(st.sampled_from(["jsonl", "transcript", "locomo", "messages"]))],
                ["ingest", place["log"], "--sample", value],
                ["export", "--since", value],
                ["export", "--session", value],
                ["backup", path],
                ["backup", value],
                ["mcp-config", "--client", value],
            ]
        )
    )
    return ["--db", place[draw(PLACES)], *command]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_argument_ends_in_a_traceback(place: dict[str, str], data: st.DataObject) -> None:
    args = data.draw(argv(place))
    code, err = run(args)  # any exception other than SystemExit fails the test
    if code != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines, f"{args}: exit {code} without a word"
        assert lines[-1].startswith(("localmem: error:", "localmem ")) or "usage:" in err, (args, err)
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["forget", "--before", "not a date"], "is not a date or time"),
        (["forget", "--turn", "99999999999999999999"], "out of range"),
        (["--db", "{notdb}", "stats"], "is not a localmem database"),
        (["--db", "{folder}", "stats"], "cannot open"),
        (["--db", "{notdb}", "ingest", "{log}"], "is not a localmem database"),
    ],
)
def test_the_named_cases_as_subprocesses(place: dict[str, str], args: list[str], says: str) -> None:
    full = [a.format(**place) for a in args]
    if full[0] != "--db":
        full = ["--db", place["good"], *full]
    proc = subprocess.run(driver(*full), capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and says in proc.stderr


@pytest.mark.parametrize("brk", ["\n", "\r", "\x85", "\u2028", "\x1e"])
def test_an_error_naming_a_path_with_a_line_break_stays_one_line(place: dict[str, str], brk: str) -> None:
    missing = place["folder"] + f"/no{brk}such.jsonl"
    proc = subprocess.run(
        driver("--db", place["good"], "ingest", missing),
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.rstrip("\n").splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("localmem: error:") and "such.jsonl" in proc.stderr
