"""Results as .npz files: written atomically, read back with errors that say what the file
is not.  Shared by :class:`~tp_limits.Trajectory` and the studies (analysis/saving.py)."""
from __future__ import annotations

import os
import tempfile
import zipfile

import numpy as np

from ..errors import TPError
from ..spec.checks import check_path


def write_npz(path, arrays: dict, what: str) -> None:
    """Write ``arrays`` to ``path`` as .npz, atomically: a temporary file in the same folder
    is renamed into place, so ``path`` never holds half a file.  ``what`` names the result
    in errors ("a Trajectory")."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TPError(f"cannot save {what} to {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise TPError(f"cannot save {what} to {path}: it is a folder")
    try:
        fd, tmp = tempfile.mkstemp(suffix=".npz", dir=folder)
    except OSError as exc:
        raise TPError(f"cannot save {what} to {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        # the temporary file is private (0600); the result is as readable as any file the
        # process writes
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_npz(path, what: str, writer: str) -> dict:
    """Every array of the .npz at ``path`` (no pickles); ``what`` names the result and
    ``writer`` the method that writes it, for the errors."""
    path = check_path(path, "path")
    if os.path.exists(path) and not os.path.isfile(path):
        # a folder, a FIFO (which would block the read forever) or a device
        raise TPError(f"{path!r} is not a regular file; {what} is an .npz file")
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise TPError(f"{path!r} holds one array (.npy), not {what} (an .npz written by "
                          f"{writer})")
        with z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise TPError(f"no file at {path!r} ({what} was expected)") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TPError(f"cannot read {what} from {path!r}: not a complete .npz written by "
                      f"{writer} ({type(exc).__name__})") from None


def _umask() -> int:
    """The process's file-mode creation mask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
