"""Settings: one checked parse of defaults < config file < environment < arguments.

Every bad value (wrong type, out of range, unknown key), from the file or from the
environment, is a ConfigError that names the key and where it came from."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from localmem import config
from localmem.cli import build_parser, cable_flags, main
from localmem.config import CableParams, QueryParams, RetrievalParams, Settings, load_settings
from localmem.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the sources: tests/conftest.py's daemon switch is not one of them."""
    monkeypatch.delenv("LOCALMEM_QUERY_DAEMON_IDLE")


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "conf" / "config.toml"
    path.parent.mkdir()
    monkeypatch.setenv("LOCALMEM_CONFIG", str(path))
    return path


# (file text, key the error must name, what it must say)
BAD_FILE = [
    ("[query]\ndaemon_idle = -5", "query.daemon_idle", "0 or more"),
    ('budget_tokens = "lots"', "budget_tokens", "an integer"),
    ("budget_tokens = 1.5", "budget_tokens", "an integer"),  # a float where an int is needed
    ("budget_tokens = true", "budget_tokens", "an integer"),  # a bool is not an int
    ("n_ctx = [1, 2]", "n_ctx", "an integer"),
    ("extract_batch = { a = 1 }", "extract_batch", "an integer"),
    ("db = 3", "db", "a path"),
    ("embedder = false", "embedder", "a string"),
    ("model = 7", "model", "a string"),
    ("n_gpu_layers = 1.0", "n_gpu_layers", "an integer"),
    ("retrieval = 3", "retrieval", "[retrieval] table"),
    ('cable = "yes"', "cable", "[cable] table"),
    ('[retrieval]\ncable = "yes"', "retrieval.cable", "true or false"),
    ("[retrieval]\ncable = 1", "retrieval.cable", "true or false"),
    ('[retrieval]\ncable_tau = "high"', "retrieval.cable_tau", "a number"),
    ("[retrieval]\ncable_tau = true", "retrieval.cable_tau", "a number"),
    ("[retrieval]\ncandidates = 2.5", "retrieval.candidates", "an integer"),
    ("[retrieval]\nextracted_cues = 1", "retrieval.extracted_cues", "a string"),
    ('[cable]\nkb = "15"', "cable.kb", "an integer"),
    ('[cable]\nenabled = "on"', "cable.enabled", "true or false"),
    # out of range
    ("budget_tokens = -5", "budget_tokens", "1 or more"),
    ("budget_tokens = 0", "budget_tokens", "1 or more"),
    ("max_budget_tokens = -1", "max_budget_tokens", "1 or more"),
    ("recall_log = -1", "recall_log", "0 or more"),
    ("budget_tokens = 40000", "budget_tokens", "must not exceed max_budget_tokens"),
    ("budget_tokens = 600\nmax_budget_tokens = 500", "budget_tokens", "must not exceed max_budget_tokens"),
    ("n_ctx = 100", "n_ctx", f"{config.MIN_N_CTX} or more"),
    ("n_threads = 0", "n_threads", "1 or more"),
    ("n_gpu_layers = -2", "n_gpu_layers", "-1 or more"),
    ("job_attempts = 0", "job_attempts", "1 or more"),
    ("[retrieval]\ncandidates = 0", "retrieval.candidates", "1 or more"),
    ("[retrieval]\ntemporal_window = -1", "retrieval.temporal_window", "0 or more"),
    ("[retrieval]\ncable_tau = 1.5", "retrieval.cable_tau", "between 0 and 1"),
    ("[retrieval]\ncable_tau = -0.1", "retrieval.cable_tau", "between 0 and 1"),
    ("[retrieval]\ncable_tau = nan", "retrieval.cable_tau", "between 0 and 1"),
    ("[retrieval]\ncable_keep_p = 2", "retrieval.cable_keep_p", "between 0 and 1"),
    ("[retrieval]\ncable_share = -1", "retrieval.cable_share", "between 0 and 1"),
    ("[retrieval]\ncommon_term_share = 1.1", "retrieval.common_term_share", "between 0 and 1"),
    ("[retrieval]\nlexical_max_rows = -1", "retrieval.lexical_max_rows", "0 or more"),
    ("[retrieval]\ncable_budget = -1", "retrieval.cable_budget", "0 or more"),
    ("[retrieval]\ncable_theta = -0.5", "retrieval.cable_theta", "0 or more"),
    ('[retrieval]\nextracted_cues = "some"', "retrieval.extracted_cues", "all, fill or off"),
    ('[retrieval]\ncue_vectors = "pooled"', "retrieval.cue_vectors", "span or separate"),
    ("[cable]\nnq = 0", "cable.nq", "1 or more"),
    ("[cable]\nverify_batch = -3", "cable.verify_batch", "1 or more"),
    # unknown keys
    ("budget = 3000", "budget", "unknown setting"),
    ("[retrieval]\ncable_tauu = 0.3", "retrieval.cable_tauu", "unknown setting"),
    ("[cable]\nk = 3", "cable.k", "unknown setting"),
    ("[answer]\nrounds = 3", "answer", "unknown setting"),
]


@pytest.mark.parametrize(("text", "key", "says"), BAD_FILE)
def test_bad_file_value_names_key_and_file(cfg: Path, text: str, key: str, says: str) -> None:
    cfg.write_text(text + "\n", "utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert str(cfg) in message
    assert re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message), message
    assert says in message


# (variable, value, key the error must name, what it must say)
BAD_ENV = [
    ("LOCALMEM_QUERY_DAEMON_IDLE", "-1", "query.daemon_idle", "0 or more"),
    ("LOCALMEM_QUERY_DAEMON_IDLE", "soon", "query.daemon_idle", "a number"),
    ("LOCALMEM_BUDGET_TOKENS", "lots", "budget_tokens", "an integer"),
    ("LOCALMEM_BUDGET_TOKENS", "1.5", "budget_tokens", "an integer"),
    ("LOCALMEM_BUDGET_TOKENS", "-1", "budget_tokens", "1 or more"),
    ("LOCALMEM_BUDGET_TOKENS", "99999", "budget_tokens", "must not exceed max_budget_tokens"),
    ("LOCALMEM_N_GPU_LAYERS", "all", "n_gpu_layers", "an integer"),
    ("LOCALMEM_N_CTX", "64", "n_ctx", "or more"),
    ("LOCALMEM_RETRIEVAL_CABLE", "maybe", "retrieval.cable", "true or false"),
    ("LOCALMEM_RETRIEVAL_CABLE_TAU", "high", "retrieval.cable_tau", "a number"),
    ("LOCALMEM_RETRIEVAL_CABLE_TAU", "1.5", "retrieval.cable_tau", "between 0 and 1"),
    ("LOCALMEM_RETRIEVAL_SECOND_HOP", "1.5", "retrieval.second_hop", "between 0 and 1"),
    ("LOCALMEM_RETRIEVAL_CANDIDATES", "0", "retrieval.candidates", "1 or more"),
    ("LOCALMEM_RETRIEVAL_EXTRACTED_CUES", "some", "retrieval.extracted_cues", "all, fill or off"),
    ("LOCALMEM_CABLE_KB", "3.0", "cable.kb", "an integer"),
    ("LOCALMEM_CABLE_ENABLED", "2", "cable.enabled", "true or false"),
    ("LOCALMEM_RETRIEVAL_CABLE_TAUU", "0.3", "retrieval.cable_tauu", "unknown setting"),
    ("LOCALMEM_CABLE_K", "3", "cable.k", "unknown setting"),
    ("LOCALMEM_RETRIEVAL", "3", "retrieval", "is a section"),
]


@pytest.mark.parametrize(("var", "value", "key", "says"), BAD_ENV)
def test_bad_env_value_names_key_and_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, key: str, says: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert f"environment variable {var}" in message
    assert re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message), message
    assert says in message


def test_env_budget_over_a_file_cap_names_both_sources(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg.write_text("max_budget_tokens = 1000\n", "utf-8")
    monkeypatch.setenv("LOCALMEM_BUDGET_TOKENS", "1500")
    with pytest.raises(ConfigError, match="LOCALMEM_BUDGET_TOKENS") as info:
        load_settings()
    assert str(cfg) in str(info.value)


def test_unreadable_file_is_a_config_error(cfg: Path) -> None:
    cfg.write_text("budget_tokens = = 3\n", "utf-8")
    with pytest.raises(ConfigError, match=re.escape(str(cfg))):
        load_settings()


GOOD = """\
db = "{db}"
embedder = "default"
model = "/models/chat.gguf"
n_gpu_layers = -1
n_ctx = 2048
n_threads = 2
extract_batch = 4
job_attempts = 5
budget_tokens = 1500
max_budget_tokens = 8000
recall_log = 50
replica = "file:///backups/localmem"

[retrieval]
temporal_window = 1
semantic_k = 4
semantic_seeds = 2
candidates = 12
candidates_ref_turns = 5000
assistant_lists = "asked"
speaker_query = false
second_hop = 0.2
project_elsewhere = 0.5
project_personal = "all"
rrf_k = 30          # an integer where a number is asked is fine
common_term_share = 1.0
lexical_max_rows = 0
extracted_cues = "off"
cue_vectors = "separate"
cable = false
cable_tau = 0.5
cable_theta = 1.01
cable_budget = 0
cable_share = 1.0
cable_keep_p = 1.0

[cable]
enabled = true
subtraction = false
verification = false
generic_queries = true
kb = 7
kh = 8
nq = 2
verify_batch = 1

[query]
daemon_idle = 30
"""


def test_good_file_round_trips(cfg: Path, tmp_path: Path) -> None:
    cfg.write_text(GOOD.format(db=tmp_path / "m.db"), "utf-8")
    s = load_settings()
    assert s == Settings(
        db=tmp_path / "m.db",
        model="/models/chat.gguf",
        n_gpu_layers=-1,
        n_ctx=2048,
        n_threads=2,
        extract_batch=4,
        job_attempts=5,
        budget_tokens=1500,
        max_budget_tokens=8000,
        recall_log=50,
        replica="file:///backups/localmem",
        retrieval=RetrievalParams(
            temporal_window=1,
            semantic_k=4,
            semantic_seeds=2,
            candidates=12,
            candidates_ref_turns=5000,
            assistant_lists="asked",
            speaker_query=False,
            second_hop=0.2,
            project_elsewhere=0.5,
            project_personal="all",
            rrf_k=30.0,
            common_term_share=1.0,
            lexical_max_rows=0,
            extracted_cues="off",
            cue_vectors="separate",
            cable=False,
            cable_tau=0.5,
            cable_theta=1.01,
            cable_budget=0,
            cable_share=1.0,
            cable_keep_p=1.0,
        ),
        cable=CableParams(
            enabled=True, subtraction=False, verification=False, generic_queries=True, kb=7, kh=8, nq=2, verify_batch=1
        ),
        query=QueryParams(daemon_idle=30.0),
    )
    assert isinstance(s.retrieval.rrf_k, float) and isinstance(s.db, Path) and isinstance(s.query.daemon_idle, float)
    # the file exercises every key there is: a key added later must be added to it too
    for section, cls in (
        ("", Settings),
        ("retrieval", RetrievalParams),
        ("cable", CableParams),
        ("query", QueryParams),
    ):
        keys = {f.name for f in fields(cls)} - set(config.SECTIONS if not section else ())
        block = GOOD.split(f"[{section}]")[1].split("\n[")[0] if section else GOOD.split("\n[")[0]
        assert keys == set(re.findall(r"^(\w+) =", block, flags=re.MULTILINE)), section


def test_no_file_no_env_gives_the_defaults(tmp_path: Path) -> None:
    s = load_settings()
    assert s == Settings()
    assert s.db == config.default_db_path()
    assert config.default("budget_tokens") == 2000 == Settings().budget_tokens
    assert config.default("retrieval.cable_tau") == RetrievalParams().cable_tau
    assert config.default("cable.kb") == CableParams().kb
    assert config.default("db") == config.default_db_path()
    assert config.default("hooks.prompt_bar") is None  # unset: the reading embedder's own bar
    with pytest.raises(ConfigError, match="unknown setting"):
        config.default("retrieval.nope")


def test_the_prompt_bar_is_unset_or_a_cosine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALMEM_HOOKS_PROMPT_BAR", "0.62")
    assert load_settings().hooks.prompt_bar == 0.62
    monkeypatch.setenv("LOCALMEM_HOOKS_PROMPT_BAR", "1.5")
    with pytest.raises(ConfigError, match=r"hooks\.prompt_bar must be between -1 and 1"):
        load_settings()


def test_precedence_file_env_argument(cfg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg.write_text(
        f'db = "{tmp_path / "file.db"}"\nbudget_tokens = 1000\nn_ctx = 1024\n'
        "[retrieval]\ncable_tau = 0.4\ncandidates = 10\n[cable]\nkb = 4\nkh = 5\n",
        "utf-8",
    )
    s = load_settings()
    assert (s.db, s.budget_tokens, s.n_ctx, s.retrieval.cable_tau, s.cable.kb) == (
        tmp_path / "file.db",
        1000,
        1024,
        0.4,
        4,
    )
    assert s.retrieval.candidates == 10 and s.retrieval.cable_theta == config.default("retrieval.cable_theta")

    monkeypatch.setenv("LOCALMEM_DB", str(tmp_path / "env.db"))
    monkeypatch.setenv("LOCALMEM_BUDGET_TOKENS", "1200")
    monkeypatch.setenv("LOCALMEM_RETRIEVAL_CABLE_TAU", "0.45")
    monkeypatch.setenv("LOCALMEM_RETRIEVAL_CABLE", "off")
    monkeypatch.setenv("LOCALMEM_CABLE_KB", "6")
    monkeypatch.setenv("LOCALMEM_MCP_TOKEN", "not a setting")  # other LOCALMEM_ variables are left alone
    s = load_settings()
    assert (s.db, s.budget_tokens, s.retrieval.cable_tau, s.retrieval.cable, s.cable.kb) == (
        tmp_path / "env.db",
        1200,
        0.45,
        False,
        6,
    )
    assert (s.n_ctx, s.retrieval.candidates, s.cable.kh) == (1024, 10, 5)  # the file's, where env is silent

    s = load_settings(db=tmp_path / "arg.db", budget_tokens=1300, embedder=None, retrieval={"cable_tau": 0.6})
    assert (s.db, s.budget_tokens, s.retrieval.cable_tau) == (tmp_path / "arg.db", 1300, 0.6)
    assert (s.retrieval.cable, s.retrieval.candidates, s.cable.kb) == (False, 10, 6)

    with pytest.raises(ConfigError, match="argument budget_tokens"):
        load_settings(budget_tokens="many")
    with pytest.raises(ConfigError, match=re.escape("argument retrieval.cable_tau")):
        load_settings(retrieval={"cable_tau": 3})
    with pytest.raises(ConfigError, match="unknown setting budget"):
        load_settings(budget=10)


def test_constructors_and_overrides_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="budget_tokens"):
        Settings(budget_tokens=-1)
    with pytest.raises(ConfigError, match="max_budget_tokens"):
        Settings(budget_tokens=5000, max_budget_tokens=4000)
    with pytest.raises(ConfigError, match=re.escape("retrieval.candidates")):
        RetrievalParams(candidates=0)
    with pytest.raises(ConfigError, match=re.escape("cable.kb")):
        CableParams(kb=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="argument n_ctx"):
        Settings().with_overrides(n_ctx="big")
    assert Settings(db=str(tmp_path / "x.db")).db == tmp_path / "x.db"  # type: ignore[arg-type]
    assert Settings().with_overrides(db=str(tmp_path / "y.db"), model=None).db == tmp_path / "y.db"


def test_cli_flags_are_checked_and_named() -> None:
    args = build_parser().parse_args(["query", "q", "--cable-tau", "1.5"])
    with pytest.raises(ConfigError, match=re.escape("--cable-tau: retrieval.cable_tau must be between 0 and 1")):
        cable_flags.apply(args, Settings())
    args = build_parser().parse_args(["worker", "--kb", "0"])
    with pytest.raises(ConfigError, match=re.escape("--kb: cable.kb must be 1 or more")):
        cable_flags.apply(args, Settings())


def test_cli_reports_a_bad_config_as_one_line(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg.write_text("[retrieval]\ncable = 'yes'\n", "utf-8")
    assert main(["stats", "--json"]) == ConfigError.exit_code
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(cfg) in err and "retrieval.cable" in err and "Traceback" not in err


def test_help_texts_read_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """The numbers in the help are the dataclasses' defaults, not copies."""
    help_of = {}
    for command in ("query", "worker"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        help_of[command] = " ".join(capsys.readouterr().out.split())
    assert f"(default {config.default('retrieval.cable_tau')})" in help_of["query"]
    assert f"(default {config.default('retrieval.cable_keep_p')};" in help_of["query"]
    assert f"budget_tokens setting, {config.default('budget_tokens')};" in help_of["query"]
    assert f"(default {config.default('cable.kb')})" in help_of["worker"]
    assert f"(default {config.default('extract_batch')})" in help_of["worker"]
