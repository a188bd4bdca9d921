"""Settings: where the database lives, which models to use, retrieval parameters.

The package: ``settings`` (the frozen dataclasses, every default), ``values`` (one value
checked and converted), and here the loader. Precedence, lowest first: the defaults < config file (``config.toml`` in the user config dir, or
``LOCALMEM_CONFIG``) < environment (``LOCALMEM_<KEY>``, ``LOCALMEM_<SECTION>_<KEY>``) < explicit arguments
(CLI flags). ``load_settings`` is the one parse of all of them into the frozen dataclasses.

Invariants:
- every default is defined once, in the dataclasses; help texts read it with ``default()``;
- every value, wherever it comes from (file, environment, argument, constructor call), is
  checked for type, range and known key; a bad one is a ``ConfigError`` naming the key
  and where it came from (the file, the environment variable, the argument).

Retrieval defaults are chosen by measurement (docs/benchmarks.md); docs/configuration.md lists every key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

import platformdirs

from localmem.config.settings import (
    APP,
    SECTIONS,
    CableParams,
    HooksParams,
    IngestParams,
    QueryParams,
    RetrievalParams,
    Section,
    Settings,
    default_db_path,
)
from localmem.config.values import CHOICES, MIN_N_CTX, RANGES, check_budgets, check_value, hints
from localmem.errors import ConfigError

__all__ = [
    "APP",
    "CHOICES",
    "ENV_PREFIX",
    "MIN_N_CTX",
    "RANGES",
    "SECTIONS",
    "CableParams",
    "HooksParams",
    "IngestParams",
    "QueryParams",
    "RetrievalParams",
    "Section",
    "Settings",
    "check",
    "config_file",
    "default",
    "default_db_path",
    "env_name",
    "load_settings",
    "settings_from",
]

ENV_PREFIX = "LOCALMEM_"


def config_file(environ: Mapping[str, str] | None = None) -> Path:
    """The config file: ``$LOCALMEM_CONFIG`` (of ``environ``, default this process's
    environment), else ``config.toml`` in the user config dir."""
    env = (os.environ if environ is None else environ).get("LOCALMEM_CONFIG")
    return Path(env) if env else Path(platformdirs.user_config_dir(APP)) / "config.toml"


def default(key: str) -> Any:
    """The built-in default of a setting by dotted key (``"budget_tokens"``,
    ``"retrieval.cable_tau"``, ``"cable.kb"``), for help texts and tool descriptions."""
    section, _, name = key.rpartition(".")
    cls = SECTIONS.get(section) if section else Settings
    for f in fields(cls) if cls is not None else ():
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
    raise ConfigError(f"unknown setting {key!r}")


def check(key: str, value: Any, where: str) -> Any:
    """``value`` for the dotted ``key``, checked and converted as the loader does;
    ``where`` (a flag, an argument) is named in the error."""
    section, _, name = key.rpartition(".")
    cls = SECTIONS.get(section) if section else Settings
    return check_value(key, hints(cls).get(name) if cls is not None else None, value, where)


def env_name(key: str) -> str:
    """The environment variable of a dotted key: ``retrieval.cable_tau`` -> ``LOCALMEM_RETRIEVAL_CABLE_TAU``."""
    return ENV_PREFIX + key.replace(".", "_").upper()


def load_settings(**overrides: Any) -> Settings:
    """Defaults < config file < environment < ``overrides`` (``None``: not given; a
    section may be given as its dataclass or a mapping of its keys), checked once."""
    return settings_from(os.environ, **overrides)


def settings_from(environ: Mapping[str, str], **overrides: Any) -> Settings:
    """:func:`load_settings` with the ``LOCALMEM_*`` variables of ``environ`` in place of this
    process's: a resident process loads a caller's settings so (``localmem.cli.served``).
    The user folders (platformdirs) are still this process's."""
    values: dict[str, dict[str, Any]] = {"": {}, **{s: {} for s in SECTIONS}}
    sources: dict[str, str] = {}
    path = config_file(environ)
    if path.is_file():
        _layer(values, sources, _read_file(path), str(path), text=False)
    _layer(values, sources, _from_env(environ), "", text=True)
    given: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        if key in SECTIONS and is_dataclass(value) and not isinstance(value, type):
            value = asdict(value)
        given[key] = value
    _layer(values, sources, given, "argument", text=False)
    top = values[""]
    budget, cap = (top.get(k, default(k)) for k in ("budget_tokens", "max_budget_tokens"))
    check_budgets(budget, cap, sources, "")
    parts = {s: cls(**values[s]) for s, cls in SECTIONS.items()}
    return Settings(**top, **parts)  # type: ignore[arg-type]


# -- reading the sources ----------------------------------------------------------------


def _read_file(path: Path) -> dict[str, Any]:
    # tomllib compiles its regexes at import (~9 ms of every start): only a process
    # that has a config file to read pays for it
    import tomllib

    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``LOCALMEM_*`` variables that are settings, as a nested mapping of
    ``(variable, raw string)`` pairs, so errors name the variable. Other ``LOCALMEM_*`` variables
    (``LOCALMEM_CONFIG``, the MCP token, ...) are not settings and are left alone, but a
    ``LOCALMEM_RETRIEVAL_*`` / ``LOCALMEM_CABLE_*`` one must name a key of its section."""
    out: dict[str, Any] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or raw == "":
            continue
        for f in fields(Settings):
            if f.name not in SECTIONS and name == env_name(f.name):
                out[f.name] = (name, raw)
        for section, cls in SECTIONS.items():
            prefix = env_name(section)
            if name == prefix:
                raise ConfigError(f"environment variable {name}: {section} is a section; set {prefix}_<KEY>")
            if name.startswith(prefix + "_"):
                key = name[len(prefix) + 1 :].lower()
                if key not in {f.name for f in fields(cls)}:
                    raise ConfigError(f"environment variable {name}: unknown setting {section}.{key}")
                out.setdefault(section, {})[key] = (name, raw)
    return out


def _layer(
    values: dict[str, dict[str, Any]], sources: dict[str, str], data: Mapping[str, Any], where: str, *, text: bool
) -> None:
    """Check ``data`` (one source's top-level keys and sections) into ``values``."""
    top = hints(Settings)
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, Mapping):
                shown = value[1] if text else value
                raise ConfigError(f"{_where(where, key, value, text)}: {key} must be a [{key}] table, got {shown!r}")
            section_hints = hints(SECTIONS[key])
            for sub, sub_value in value.items():
                dotted = f"{key}.{sub}"
                if sub not in section_hints:
                    raise ConfigError(f"{_where(where, dotted, sub_value, text)}: unknown setting {dotted}")
                values[key][sub] = _one(dotted, section_hints[sub], sub_value, where, sources, text)
        elif key in top:
            values[""][key] = _one(key, top[key], value, where, sources, text)
        else:
            raise ConfigError(f"{_where(where, key, value, text)}: unknown setting {key}")


def _one(key: str, hint: Any, value: Any, where: str, sources: dict[str, str], text: bool) -> Any:
    label = _where(where, key, value, text)
    sources[key] = label
    return check_value(key, hint, value[1] if text else value, label, text=text)


def _where(where: str, key: str, value: Any, text: bool) -> str:
    if text:
        return f"environment variable {value[0]}"
    return f"argument {key}" if where == "argument" else where
