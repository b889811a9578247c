"""Which finished parts were verified since they last changed, so a part's checksums are read once, not per open.

Checking a part's checksums (``runner.output.checksums``) reads every byte of it: about one CPU-second per GB,
which is the whole cost of opening a 1M-trial output (1 GB of parts) and ten seconds at 10M, paid again by every
``report``, ``diff``, ``view`` poll and resume. Git's index solves the same problem for its working tree: a
file whose ``stat`` (device, inode, size, mtime, ctime) is what it was when it was last hashed is not hashed
again. Any write through the file system moves the ctime, which no user call can set back; a copy or a
rename-over is a new inode. So a part whose ``stat`` matches a record made when it verified has the bytes it
had then, unless the disk changed them under the file system (which its own checksums catch).

Two records:
- in this process, a set of ``stat`` keys: the parts this process wrote (the writer computed their checksums from
  the batches it wrote) and the ones it verified; a session's finish and the viewer's polls read them free;
- on disk, outside every output (readers never write into one), an empty file per verified part state under
  ``$TRIALGRID_VERIFIED_DIR`` (default ``${XDG_CACHE_HOME:-~/.cache}/trialgrid/verified``); ``off`` turns it
  off, so every process verifies each part once. Nothing there is needed: a missing or unwritable folder only
  means parts are verified again.

Git's "racy" rule applies: timestamps are coarse (a few milliseconds), so a change made in the same tick as the
check could keep the ``stat`` the check saw. A part whose mtime or ctime is under ``RACY_S`` old when it is
verified is therefore not recorded; it is verified again by the next open. The one exception is a part this
process wrote: it is trusted from its rename on, in this process only (another process writing into the same
tick would have to bypass the output's lock).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

__all__ = ["RACY_S", "forget", "is_verified", "note_verified", "note_written", "verified_dir"]

RACY_S = 2.0
_ENV = "TRIALGRID_VERIFIED_DIR"
_PRUNE_AFTER_S = 90 * 86400  # records of part states not read for this long are deleted, now and then

_known: set[tuple[int, ...]] = set()


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def verified_dir() -> Path | None:
    """Where verified part states are recorded across processes, or None (``TRIALGRID_VERIFIED_DIR=off``)."""
    configured = os.environ.get(_ENV, "").strip()
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trialgrid" / "verified"


def _record_path(folder: Path, key: tuple[int, ...]) -> Path:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=16).hexdigest()
    return folder / digest[:2] / digest


def is_verified(st: os.stat_result) -> bool:
    """Whether the part in this ``stat`` state was verified (or written) before, here or by another process."""
    key = _key(st)
    if key in _known:
        return True
    folder = verified_dir()
    if folder is None:
        return False
    record = _record_path(folder, key)
    try:
        os.utime(record)  # found, and marked as read: pruning deletes only the states nobody reads
    except OSError:
        return False
    _known.add(key)
    return True


def note_verified(st: os.stat_result) -> None:
    """The part in this ``stat`` state (taken before it was read) verified: remember it, on disk unless racy."""
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_S * 1e9:
        return
    key = _key(st)
    _known.add(key)
    folder = verified_dir()
    if folder is None:
        return
    record = _record_path(folder, key)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.touch()
    except OSError:
        return  # a read-only or full home: the part is verified again next time
    if record.name.endswith("00"):  # about one write in 256 prunes its shard
        _prune(record.parent)


def note_written(path: Path) -> None:
    """This process just finalized ``path`` through the checksummed writer: its own reads need not verify it."""
    try:
        _known.add(_key(path.stat()))
    except OSError:
        pass


def forget() -> None:
    """Drop this process's record (tests; a process that wants every part verified again)."""
    _known.clear()


def _prune(shard: Path) -> None:
    cutoff = time.time() - _PRUNE_AFTER_S
    try:
        with os.scandir(shard) as entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                except OSError:
                    continue
    except OSError:
        return
