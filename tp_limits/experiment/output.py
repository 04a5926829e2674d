"""The output folder of a command that writes a report: checked before any work, held by
one process at a time (a lock file beside it), written into a staging folder beside it and
moved into place only when every file is written (``.NAME.incomplete`` otherwise)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from ..engine.executors import sigint_deferred
from .schema import ExperimentError


def check_output_folder(out, force: bool = False) -> Path:
    """Refuse, before any work, an output path that cannot take the report: a file, a
    symbolic link, a non-empty folder (which would mix two runs) unless ``force`` (and
    then one this process may remove), or a path whose nearest existing parent is a
    file or not writable."""
    out = Path(out)
    if out.is_symlink():
        raise ExperimentError(f"--out {out} is a symbolic link; give a real folder (the "
                              "report replaces the folder, which would not follow the link)")
    if out.exists() and not out.is_dir():
        raise ExperimentError(f"--out {out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ExperimentError(f"output folder {out} is not empty; choose another --out, "
                                  "or pass --force to replace its contents")
        if not (os.access(out, os.W_OK | os.X_OK) and os.access(out.parent, os.W_OK)):
            raise ExperimentError(f"--force cannot replace {out}: it, or its parent folder, "
                                  "is not writable")
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ExperimentError(f"cannot create {out}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise ExperimentError(f"cannot create {out}: {parent} is not writable")
    return out


@contextlib.contextmanager
def claimed_output(out):
    """Hold ``out`` for this process while a run writes to it: a lock file beside it,
    created exclusively, so a second run started into the same ``--out`` fails at once
    with a clear message instead of both writing through one staging folder.  A lock
    whose process is gone is taken over."""
    out = Path(out)
    out.absolute().parent.mkdir(parents=True, exist_ok=True)
    lock = out.absolute().parent / f".{out.name}.lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            holder = _lock_holder(lock)
            if holder is not None and _alive(holder):
                raise ExperimentError(f"another run (process {holder}) is writing to {out}; "
                                      "wait for it to finish or choose another --out") from None
            lock.unlink(missing_ok=True)            # its process is gone: a stale lock
    else:
        raise ExperimentError(f"cannot claim {out}: {lock} keeps coming back")
    with os.fdopen(fd, "w") as fh:
        fh.write(str(os.getpid()))
    try:
        yield out
    finally:
        lock.unlink(missing_ok=True)


def _lock_holder(lock: Path):
    try:
        return int(lock.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def staged(out, force: bool, write) -> list:
    """Run ``write(folder) -> files`` into a staging folder beside ``out`` and move it into
    place only when it returned; on failure the staging folder is left, named incomplete.
    A mount point cannot be removed or replaced: there the staging folder is inside it,
    and the report's entries are moved up into it (the same file system)."""
    out = check_output_folder(out, force)
    mounted = os.path.ismount(out)
    stage = (out if mounted else out.parent) / f".{out.name}.incomplete"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    # a Ctrl-C while the report is written (a second one, after the run was interrupted)
    # waits until the report is in place: it is the last thing the run does
    with sigint_deferred(reraise=False):
        try:
            files = write(stage)
        except BaseException as exc:
            raise ExperimentError(f"writing the report failed ({type(exc).__name__}: {exc}); "
                                  f"what was written is in {stage}, which is incomplete") \
                from exc
        if mounted:
            _publish_into(stage, out)
        else:
            if out.exists():
                shutil.rmtree(out)
            os.replace(stage, out)
    return files


def _publish_into(stage: Path, out: Path) -> None:
    """Replace the contents of the folder ``out`` by those of ``stage`` (inside it)."""
    for old in out.iterdir():
        if old != stage:
            shutil.rmtree(old) if old.is_dir() and not old.is_symlink() else old.unlink()
    for new in stage.iterdir():
        os.replace(new, out / new.name)
    stage.rmdir()


def write_json_file(path: Path, obj) -> None:
    """``obj`` as indented JSON at ``path`` (inside a staging folder: the folder, not the
    file, is what moves into place atomically)."""
    path.write_text(json.dumps(obj, indent=2, default=str), encoding="utf-8")
