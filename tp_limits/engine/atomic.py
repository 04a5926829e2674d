"""Files written atomically: into a temporary file in the same folder, renamed into place
when complete, so a path never holds half a file (a Ctrl-C, a full disk or an error while
writing leaves the previous file, or none)."""
from __future__ import annotations

import json
import os
import tempfile

from ..errors import TPError


def write_atomic(path, write, what: str, suffix: str = "", binary: bool = True) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path`` and rename it to ``path``;
    ``what`` names the content in errors ("a Trajectory")."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TPError(f"cannot save {what} to {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise TPError(f"cannot save {what} to {path}: it is a folder")
    try:
        fd, tmp = tempfile.mkstemp(suffix=suffix, dir=folder)
    except OSError as exc:
        raise TPError(f"cannot save {what} to {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                                                       {"encoding": "utf-8"})) as fh:
            write(fh)
        # the temporary file is private (0600); the result is as readable as any file the
        # process writes
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path, obj, what: str = "the results") -> None:
    """``obj`` as indented JSON at ``path``, atomically (the studies' result files, rewritten
    after every finished piece of work)."""
    write_atomic(path, lambda fh: json.dump(obj, fh, indent=1), what, ".json", binary=False)


def _umask() -> int:
    """The process's file-mode creation mask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
