"""Defences against hostile or broken input, kept in one place so every edge uses the same rules.

trialgrid reads files other people wrote (sweeps, case files, catalogues, another
harness's CSVs, an output directory with its manifest) and writes files whose names
come from labels in them. So:

- **bounds**: a user file is read only when it is a regular file no larger than
  ``max_input_bytes()`` (``TRIALGRID_MAX_INPUT_MB``; default 16 MiB for YAML, 128 MiB for
  data files — JSON, JSON lines, CSV, Parquet — which parse into far less memory per
  byte), never a device, FIFO or directory, and never more than the cap plus one byte;
  a compressed file (Parquet) is held to the same cap for its decoded size
  (``check_decoded_size``), and a table's cells to ``MAX_CELL_BYTES``. No importer streams without a bound: each reads a whole
  file (a trials CSV's checks — duplicate cells, per-cell run numbers — need every row),
  so the cap is what bounds its memory;
- **confinement**: a label that becomes part of a file name goes through
  ``safe_filename`` (injective, even with case ignored: two labels never share a file), and every such write
  goes through ``confined``, which refuses a path that resolves outside its directory;
- **escaping**: ``csv_cell`` neutralises spreadsheet formulas (OWASP: a leading ``'``
  before ``= + - @`` tab and CR, numbers excepted); ``term_text`` shows control
  characters as escapes so a label cannot move the cursor, retitle or clear a terminal;
- **safe replace**: ``replacing`` builds a new output beside the old one and swaps it
  in only when the build succeeded, so ``--force`` with bad input destroys nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from runner.core.errors import UserError

#: environment variable raising (or lowering) the size cap of every user file trialgrid reads
_MAX_INPUT_ENV = "TRIALGRID_MAX_INPUT_MB"
_DEFAULT_MAX_INPUT_MB = 16
#: data files: JSON (and JSON lines: BFCL's full import is a 20 MB case file) has no aliases and no line map to
#: build; a CSV or Parquet file of trials is a table of short strings (a million trials is about 50 MB of CSV)
_DEFAULT_MAX_DATA_INPUT_MB = 128
_DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet", ".pq")


def max_input_bytes(path: Path | None = None) -> int:
    """The size cap of sweeps, case files, catalogues and importer inputs, in bytes (``path`` picks a data
    file's)."""
    raw = os.environ.get(_MAX_INPUT_ENV, "").strip()
    if not raw:
        data = path is not None and path.suffix.lower() in _DATA_SUFFIXES
        return (_DEFAULT_MAX_DATA_INPUT_MB if data else _DEFAULT_MAX_INPUT_MB) << 20
    try:
        mb = float(raw)
    except ValueError:
        raise UserError(f"{_MAX_INPUT_ENV}={raw!r} is not a number of megabytes") from None
    if not mb > 0:
        raise UserError(f"{_MAX_INPUT_ENV}={raw!r} must be a positive number of megabytes")
    return int(mb * (1 << 20))


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``"a FIFO (named pipe)"``, ``"a device"``...),
    else None. A ``stat``, which never blocks: opening a FIFO to read it would wait for a writer forever."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind_of(mode)


def check_regular_file(path: Path, *, what: str) -> int:
    """The size of ``path`` if it is a regular file within the cap; otherwise a located ``UserError``."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserError(f"{what} not found", file=path,
                        hint="check the path; relative paths are resolved against the sweep file's folder") from None
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{what} is {_kind_of(st.st_mode)}, not a regular file", file=path,
                        hint="name a file with the content itself")
    limit = max_input_bytes(path)
    if st.st_size > limit:
        raise UserError(f"{what} is {st.st_size:,} bytes, over the {limit:,}-byte input cap", file=path,
                        hint=f"set {_MAX_INPUT_ENV} to a larger number of megabytes if the file is meant to be this big")
    return st.st_size


#: how much of an over-long line is read at a time while skipping it
_DRAIN_CHUNK = 1 << 20


class ReadsLines(Protocol):
    """A binary file, plain or gzip: what ``bounded_lines`` reads."""

    def readline(self, size: int = -1, /) -> bytes: ...


def bounded_lines(fh: ReadsLines, limit: int) -> Iterator[tuple[int, bytes | None, int]]:
    """``(line number, line, bytes)`` of each line of a binary file, never holding more than ``limit + 1`` bytes of
    one: a longer line is skipped in chunks and given as ``None`` with its length, so a streaming reader (trace
    import, trace audit) can count it as one bad record. Blank lines are given too (the caller decides)."""
    number = 0
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            skipped = len(line)
            while True:
                chunk = fh.readline(_DRAIN_CHUNK)
                skipped += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield number, None, skipped
            continue
        yield number, line, len(line)


def read_capped(path: Path, *, what: str) -> bytes:
    """The bytes of a regular file within the size cap (read at most cap + 1 bytes, whatever stat said)."""
    check_regular_file(path, what=what)
    cap = max_input_bytes(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(cap + 1)
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    if len(raw) > cap:
        raise UserError(f"{what} grew past the {cap:,}-byte input cap while being read", file=path,
                        hint=f"set {_MAX_INPUT_ENV} to a larger number of megabytes if the file is meant to be this big")
    return raw


#: the longest cell of an imported table (a label, an error text): a whole file in one cell costs its size again
#: in every column expression an importer runs over it
MAX_CELL_BYTES = 1 << 20


def check_cell_size(size: int, path: Path, *, what: str, row: int, column: str) -> None:
    """A table cell (``row``: 1-based, the header not counted) must hold at most ``MAX_CELL_BYTES``."""
    if size > MAX_CELL_BYTES:
        raise UserError(f"{what}: data row {row:,}, column {one_line(column)[:80]!r} holds {size:,} bytes; a cell may "
                        f"hold at most {MAX_CELL_BYTES:,}", file=path,
                        hint="is a quote left open, or is this not a table of trials?")


def check_decoded_size(size: int, path: Path, *, what: str) -> None:
    """A compressed file (Parquet) must decode to no more than the cap: its bytes on disk bound nothing."""
    cap = max_input_bytes(path)
    if size > cap:
        raise UserError(f"{what} decodes to {size:,} bytes, over the {cap:,}-byte input cap", file=path,
                        hint=f"set {_MAX_INPUT_ENV} to a larger number of megabytes if the file is meant to be this big")


def decode_utf8(raw: bytes, path: Path, *, what: str) -> str:
    """``raw`` as text; a binary or mis-encoded file is a located ``UserError`` (line of the first bad byte)."""
    try:
        return raw.decode("utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{what} is not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x}); "
                        "is it a binary file?", file=path, line=line) from None


def read_user_text(path: Path, *, what: str) -> str:
    """Read a small user text file: regular, capped, UTF-8. Raises a located ``UserError``."""
    return decode_utf8(read_capped(path, what=what), path, what=what)


# -- file names from labels ----------------------------------------------------------------------------------------

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
_HASHED_TAIL = re.compile(r"-[0-9a-f]{8}$")
_WINDOWS_RESERVED = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?", re.IGNORECASE)


#: the longest label (model, probe, run name) a sweep may use
_MAX_LABEL = 200


def printable_label(value: str, what: str) -> str:
    """A label shown in terminals, CSV and file names: no control characters, at most ``_MAX_LABEL`` long.

    Raises ``ValueError`` (pydantic validators turn it into a located error).
    """
    bad = next((ch for ch in value if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise ValueError(f"{what} {one_line(value)!r} holds the control character U+{ord(bad):04X}; "
                         "labels are printed and become file names")
    if len(value) > _MAX_LABEL:
        raise ValueError(f"{what} is {len(value)} characters long; at most {_MAX_LABEL}")
    return value


def safe_filename(label: str) -> str:
    """A file-name component for ``label``: the label itself when it is plainly safe, else a slug and a hash.

    Injective, also where file names are compared without case (macOS's and Windows'
    default file systems): a label kept as is is lower case and never ends in ``-`` and 8
    hex digits (those are hashed too), and a hashed one always does, with the hash of
    the exact label, so ``team/model`` and ``team-model``, or ``Model`` and ``model``, get
    different files. The result never contains a separator, never starts with a dot and
    is at most 100 characters.
    """
    text = str(label)
    if (_SAFE_NAME.fullmatch(text) and text == text.lower() and not _HASHED_TAIL.search(text) and ".." not in text
            and not text.endswith(".") and not _WINDOWS_RESERVED.fullmatch(text)):
        return text
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).replace("..", "-").strip("-.")[:80] or "x"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def confined(directory: Path, name: str) -> Path:
    """``directory / name``, refused unless it resolves inside ``directory`` (symlinks followed)."""
    root = directory.resolve()
    target = (directory / name).resolve()
    if target == root or root not in target.parents:
        raise UserError(f"refusing to write {name!r}: it resolves outside {directory} (to {target})",
                        hint="a label that names a file must not hold path separators or '..'")
    return directory / name


# -- escaping ------------------------------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?%?")


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not evaluate: text starting with = + - @ tab or CR gets a leading '."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def term_text(text: object, *, keep_newlines: bool = True) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``), so it prints as what it is.

    Covers C0 and C1 controls, DEL and the bidirectional overrides that reorder what a
    terminal shows; tabs and (unless ``keep_newlines`` is false) newlines are kept.
    """
    s = str(text)
    if not keep_newlines:
        s = s.replace("\n", "\\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)


def one_line(text: object) -> str:
    """``text`` on a single terminal line: controls (newlines too) escaped."""
    return term_text(text, keep_newlines=False)


# -- output directories ----------------------------------------------------------------------------------------------

#: the kernel's and the devices' file systems: nothing of trialgrid's is written there, by any path that leads there
_SYSTEM_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


def check_target_path(path: Path | str, *, what: str) -> Path:
    """A path trialgrid will write into (an output, a cache, a report): refused, in one line, when it holds a NUL
    or a control character, or lies in ``/proc``, ``/sys`` or ``/dev`` as written or once its symlinks are followed
    (``/proc/self/cwd/out`` is the current directory by another name). Returns it as a ``Path``."""
    text = os.fspath(path)
    bad = next((ch for ch in text if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F), None)  # C0, DEL, C1
    if bad is not None:
        raise UserError(f"the {what} path {one_line(text)[:200]!r} holds the control character U+{ord(bad):04X}",
                        hint="a path is printable text; fix the path")
    target = Path(text)
    try:
        candidates = [Path(os.path.abspath(target)), target.resolve()]
    except (OSError, RuntimeError):  # a symlink loop: nothing can be written there either
        raise UserError(f"the {what} path cannot be resolved (a symlink loop?)", file=text) from None
    for candidate in candidates:
        root = next((r for r in _SYSTEM_ROOTS if candidate == r or r in candidate.parents), None)
        if root is not None:
            raise UserError(f"the {what} lies in {root}, the kernel's or the devices' file system", file=text,
                            hint="choose a directory on a disk")
    return target


def check_output_dir(out: Path, *, what: str = "output directory") -> None:
    """``out`` must be a directory or not exist yet (its parent then a directory we may create into), and nowhere
    ``check_target_path`` refuses."""
    check_target_path(out, what=what)
    if out.exists() and not out.is_dir():
        raise UserError(f"{what} exists and is not a directory", file=out,
                        hint="choose another --out, or remove the file")
    parent = next((p for p in [out, *out.parents] if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"cannot create {what}: {parent} is not a directory", file=out)


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """Build a new ``target`` directory in a temporary sibling; swap it in only if the block succeeds.

    The old ``target`` (if any) is kept until the new one is complete, then moved aside
    and removed; a failure inside the block removes the half-built sibling and leaves
    ``target`` as it was.
    """
    check_output_dir(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    build.chmod(0o777 & ~umask)  # mkdtemp makes it private; the output is an ordinary directory
    try:
        yield build
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / "previous")
    os.replace(build, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def binds_loopback(host: str) -> bool:
    """A listening address that only this machine reaches: ``localhost`` or a loopback IP (``0.0.0.0`` and a
    host name are not: they can face a network). ``trialgrid serve``, ``view`` and ``audit --listen`` ask it."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
