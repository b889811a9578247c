"""One writer per output directory: an OS lock (``flock``) on ``OUT/.trialgrid.lock``.

Two runs writing into one ``--out`` used to both finish "fine" with every trial
twice, and a run started a little later "repaired" (deleted) the first one's open
stream. Every process that writes an output — a run in any mode, a rescore into its
destination, an ``import --force`` over an earlier output — holds this lock for as
long as it writes; the repair of leftover streams happens only under it.

``flock`` belongs to the open file description, so the kernel releases it when the
holder dies however it dies (SIGKILL, OOM): a dead holder's lock is free at once,
nothing is ever stale and nothing needs breaking. The file's text (pid, host, time)
only names the holder in the refusal. Network file systems that do not implement
``flock`` fall back to a lock per machine; run one writer per output there.
"""

from __future__ import annotations

import errno
import fcntl
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from runner.core.errors import UserError

__all__ = ["LOCK_FILE", "OutputLock", "lock_output"]

LOCK_FILE = ".trialgrid.lock"


class OutputLock:
    """A held lock on one output directory; ``release`` (or the process ending) frees it."""

    def __init__(self, out: Path, fd: int) -> None:
        self.out = out
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __del__(self) -> None:  # a holder dropped without release (an error path) frees the output too
        try:
            self.release()
        except OSError:
            pass

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _holder(path: Path, *, settle_s: float = 0.5) -> str:
    """The holder's own description of itself. A holder writes it just after taking the lock, so a file
    still empty is read again for up to ``settle_s`` before the holder is called "another process"."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return "another process"
        if text:
            return text.splitlines()[0][:200]
        if time.monotonic() >= deadline:
            return "another process"
        time.sleep(0.02)


#: what a writer creates directly in an output: none of them may be a link leading out of it
_OWN_ENTRIES = (LOCK_FILE, "trials", "manifest.json", "manifest.json.tmp")


def check_own_entries(out: Path) -> None:
    """Refuse, in one line, an output whose lock, ``trials/`` or manifest is a symbolic link leaving it: writing
    through it would put trials (or truncate a file) somewhere the user never named."""
    root = out.resolve()
    for name in _OWN_ENTRIES:
        entry = out / name
        if not entry.is_symlink():
            continue
        target = entry.resolve()
        if target == root or root not in target.parents:
            raise UserError(f"{name} is a symbolic link to {os.readlink(entry)}, outside the output; trialgrid "
                            "writes an output only inside its own directory", file=entry,
                            hint="remove the link (move what it points to into the output if it is this run's) "
                                 "and rerun the same command")


def lock_output(out: Path, *, wait: bool = False, what: str = "run",
                poll_s: float = 0.2, timeout_s: float | None = None) -> OutputLock:
    """Take ``out``'s writer lock (creating ``out``); ``UserError`` in one line if another process holds it.

    ``wait``: block until the holder finishes (``timeout_s``: at most that long) instead of refusing.
    """
    out.mkdir(parents=True, exist_ok=True)
    check_own_entries(out)
    path = out / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                raise UserError(f"{out} is being written by {_holder(path)}; one writer per output directory",
                                hint="wait for it to finish, rerun with --wait to start when it does, "
                                     "or choose another --out")
            time.sleep(poll_s)
    except BaseException:
        os.close(fd)
        raise
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    line = f"trialgrid {what} (pid {os.getpid()} on {platform.node()}, since {stamp})\n".encode()
    os.pwrite(fd, line, 0)  # written, then cut to length: a reader never sees the file empty between holders
    os.ftruncate(fd, len(line))
    return OutputLock(out, fd)
