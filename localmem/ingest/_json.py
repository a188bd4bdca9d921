"""JSON reading for parsers: streamed top-level records with located errors, typed fields.

``records(path, start)`` yields the top-level records of a file without loading it
whole: the elements of a top-level array (``$[i]``), the lines of a JSON Lines file
(``line N``), or, for one object spread over several lines, that object (``$``). A
syntax error inside an array ends the file (it cannot be stepped over) and is raised;
a bad line of a JSON Lines file is a bad record that ``--skip-bad`` can step over.
Every record carries the ``Cursor`` just after it, so an ingest can resume there.

Memory stays bounded: a record longer than ``max_bytes`` (``MAX_RECORD_BYTES`` unless a
format asks for less) is refused without being read whole: a JSON Lines line becomes a
bad record (``--skip-bad`` steps over it), an array element ends the file.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from localmem.errors import InputError

CHUNK = 1 << 20
WINDOW = 65536
MAX_RECORD_BYTES = 64 << 20  # one conversation of an export, one line of a JSON Lines file
_WS = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Cursor:
    """A point in a file between two units: byte offset, units before it, line number."""

    offset: int = 0
    index: int = 0
    line: int = 1


@dataclass(frozen=True)
class Record:
    index: int
    where: str
    value: Any
    after: Cursor
    error: InputError | None = None


def read_json(path: Path) -> Any:
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg}", path=str(path), where=f"line {exc.lineno} column {exc.colno}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise InputError(f"invalid JSON: {_why(exc)}", path=str(path)) from exc


def field(obj: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str, *, required: bool = True) -> Any:
    """obj[key], checked to be of ``kind``; errors name the JSON path."""
    if not isinstance(obj, dict):
        raise InputError(f"expected an object, got {type(obj).__name__}", path=str(path), where=where)
    if key not in obj or obj[key] is None:
        if required:
            raise InputError(f"missing field {key!r}", path=str(path), where=where)
        return None
    value = obj[key]
    if not isinstance(value, kind) or (
        isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    ):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(
            f"field {key!r} should be {names}, got {type(value).__name__}", path=str(path), where=f"{where}.{key}"
        )
    return value


def shape(path: Path) -> str:
    """``array``, ``lines`` (JSON Lines) or ``object`` (one value over several lines)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(65536)
            text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
            if not text:
                raise InputError("file is empty", path=str(path))
            if text[0] == "[":
                return "array"
            if text[0] != "{":
                raise InputError(f"not JSON (starts with {text[:20]!r})", path=str(path))
            fh.seek(0)
            first = fh.readline(MAX_RECORD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    try:
        return "lines" if isinstance(json.loads(first.decode("utf-8-sig")), dict) else "object"
    except (ValueError, RecursionError):
        return "object"


def records(path: Path, start: Cursor | None = None, max_bytes: int = MAX_RECORD_BYTES) -> Iterator[Record]:
    start = start or Cursor()
    kind = shape(path)
    if kind == "object":
        if start.index == 0:
            size = _size(path)
            if size > max_bytes:
                raise InputError(_too_long("the JSON object", size, max_bytes), path=str(path))
            yield Record(0, "$", read_json(path), Cursor(size, 1, 1))
        return
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    with fh:
        if kind == "lines":
            yield from _lines(fh, path, start, max_bytes)
        else:
            yield from _ArrayReader(fh, path, start, max_bytes).elements()


def _too_long(what: str, size: int, limit: int) -> str:
    return f"{what} has {size:,} bytes, more than the {limit:,} a record may have; not read"


def first_line_id(path: Path) -> str:
    """A short hash of a file's first non-blank line: what identifies a log whatever its
    file name (a copy or a rename has the same; a log that grows keeps it)."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for raw in iter(lambda: fh.readline(WINDOW), b""):
                if raw.strip():
                    h.update(raw.strip())
                    break
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    return h.hexdigest()[:12]


def bounded_lines(fh: IO[bytes], limit: int) -> Iterator[tuple[bytes | None, int]]:
    """The lines of ``fh`` with their byte length; a line longer than ``limit`` bytes
    comes as None, read past in chunks (never held whole)."""
    while True:
        raw = fh.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw, len(raw)
            continue
        size = len(raw)
        while not raw.endswith(b"\n"):
            raw = fh.readline(CHUNK)
            if not raw:
                break
            size += len(raw)
        yield None, size


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc


def _lines(fh: IO[bytes], path: Path, start: Cursor, max_bytes: int) -> Iterator[Record]:
    fh.seek(start.offset)
    offset, n = start.offset, start.line
    try:
        for raw, size in bounded_lines(fh, max_bytes):
            begin = offset
            offset += size
            n += 1
            line_no = n - 1
            where = f"line {line_no}"
            if raw is None:
                err = InputError(_too_long("the line", size, max_bytes), path=str(path), where=where)
                yield Record(line_no - 1, where, None, Cursor(offset, line_no, n), err)
                continue
            complete = raw.endswith(b"\n")
            # A last line without its newline may still be being written: resume before it.
            after = Cursor(offset, line_no, n) if complete else Cursor(begin, line_no - 1, line_no)
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8-sig" if begin == 0 else "utf-8")
                value = loads(text)
            except UnicodeDecodeError as exc:
                err = InputError(f"not UTF-8: {exc.reason}", path=str(path), where=where)
                yield Record(line_no - 1, where, None, after, err)
                continue
            except json.JSONDecodeError as exc:
                err = InputError(f"invalid JSON: {exc.msg}", path=str(path), where=f"{where} column {exc.colno}")
                yield Record(line_no - 1, where, None, after, err)
                continue
            except (ValueError, RecursionError) as exc:
                err = InputError(f"invalid JSON: {_why(exc)}", path=str(path), where=where)
                yield Record(line_no - 1, where, None, after, err)
                continue
            yield Record(line_no - 1, where, value, after)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path), where=f"line {n}") from exc


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(text: str) -> Any:
    """``json.loads`` as every ingest reader decodes JSON: lone surrogates replaced
    (``_clean``), so that nothing parsed from a file fails where it is stored."""
    return _clean(json.loads(text), text)


def _clean(value: Any, raw: str) -> Any:
    """JSON may spell lone UTF-16 surrogates (``"\\ud800"``), which no UTF-8 text can
    hold: replace them with U+FFFD so that nothing downstream fails on them."""
    if not _SURROGATE_ESCAPE.search(raw):
        return value
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    stack: list[Any] = [value] if isinstance(value, list | dict) else []
    while stack:
        item = stack.pop()
        entries = list(enumerate(item)) if isinstance(item, list) else list(item.items())
        if isinstance(item, dict):
            item.clear()
        for k, v in entries:
            if isinstance(v, str):
                v = _SURROGATE.sub("\ufffd", v)
            elif isinstance(v, list | dict):
                stack.append(v)
            if isinstance(k, str):
                k = _SURROGATE.sub("\ufffd", k)
            item[k] = v
    return value


def _why(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


class _ArrayReader:
    """The elements of a top-level JSON array, decoded one at a time from a buffer that
    grows only as far as the current element needs (so memory stays at about the size of
    the largest element, not of the file)."""

    def __init__(self, fh: IO[bytes], path: Path, start: Cursor, max_bytes: int = MAX_RECORD_BYTES) -> None:
        self.fh = fh
        self.max_chars = max_bytes  # a str of n bytes has at most n characters
        self.path = path
        self.start = start
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.byte = start.offset  # byte offset of buf[pos]
        self.line = start.line  # line number at buf[pos]
        self.col0 = 0  # column of buf[0] within its line (unknown after a resume: 0)

    def elements(self) -> Iterator[Record]:
        self.fh.seek(self.start.offset)
        index = self.start.index
        if self.start.offset == 0:
            self._skip_ws()
            if self._peek() == "\ufeff":
                self._advance(self.pos + 1)
                self._skip_ws()
            self._expect("[")
            self._skip_ws()
            if self._peek() == "]":
                self._advance(self.pos + 1)
                self._expect_end()
                return
        else:
            self._skip_ws()
            if self._peek() == "]":
                self._advance(self.pos + 1)
                self._expect_end()
                return
            self._expect(",")
        while True:
            self._skip_ws()
            value = self._value(index)
            yield Record(index, f"$[{index}]", value, Cursor(self.byte, index + 1, self.line))
            index += 1
            self._skip_ws()
            c = self._peek()
            if c == "]":
                self._advance(self.pos + 1)
                self._expect_end()
                return
            if c != ",":
                raise self._error(self.pos, f"expected ',' or ']' after element {index - 1}")
            self._advance(self.pos + 1)

    def _fill(self) -> None:
        if self.eof:
            return
        if len(self.buf) - self.pos > self.max_chars:
            raise InputError(
                f"an element of the array is longer than {self.max_chars:,} bytes; not read",
                path=str(self.path),
                where=f"line {self.line}",
            )
        consumed = self.buf[: self.pos]
        nl = consumed.rfind("\n")
        self.col0 = len(consumed) - nl - 1 if nl >= 0 else self.col0 + len(consumed)
        try:
            data = self.fh.read(max(CHUNK, len(self.buf)))
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8: {exc.reason}", path=str(self.path), where=f"line {self.line}") from exc
        except OSError as exc:
            raise InputError(f"cannot read file: {exc}", path=str(self.path)) from exc
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        self.eof = not data

    def _advance(self, to: int) -> None:
        chunk = self.buf[self.pos : to]
        self.byte += len(chunk) if chunk.isascii() else len(chunk.encode("utf-8"))
        self.line += chunk.count("\n")
        self.pos = to

    def _peek(self) -> str:
        while self.pos >= len(self.buf) and not self.eof:
            self._fill()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def _skip_ws(self) -> None:
        while True:
            m = _WS.match(self.buf, self.pos)
            end = m.end() if m else self.pos
            self._advance(end)
            if end < len(self.buf) or self.eof:
                return
            self._fill()

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            found = self._peek()
            raise self._error(
                self.pos, f"expected {char!r}, found {found!r}" if found else f"expected {char!r}, found the end"
            )
        self._advance(self.pos + 1)

    def _expect_end(self) -> None:
        self._skip_ws()
        if self._peek():
            raise self._error(self.pos, "extra data after the top-level array")

    def _value(self, index: int) -> Any:
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                near_end = exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")
                if near_end and not self.eof:
                    self._fill()
                    continue
                raise self._error(exc.pos, f"invalid JSON in element $[{index}]: {exc.msg}") from exc
            except (ValueError, RecursionError) as exc:
                raise self._error(self.pos, f"invalid JSON in element $[{index}]: {_why(exc)}") from exc
            if end >= len(self.buf) and not self.eof:  # a number or literal may go on
                self._fill()
                continue
            value = _clean(value, self.buf[self.pos : end])
            self._advance(end)
            return value

    def _error(self, at: int, message: str) -> InputError:
        line = self.line + self.buf.count("\n", self.pos, at)
        nl = self.buf.rfind("\n", 0, at)
        col = at - nl if nl >= 0 else self.col0 + at + 1
        return InputError(message, path=str(self.path), where=f"line {line} column {col}")
