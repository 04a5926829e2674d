"""Results as .npz files: written atomically, read back with errors that say what the file
is not.  Shared by :class:`~tp_limits.Trajectory` and the studies (analysis/saving.py)."""
from __future__ import annotations

import os
import zipfile

import numpy as np

from ..errors import TPError
from ..spec.checks import check_path
from .atomic import write_atomic


def write_npz(path, arrays: dict, what: str) -> None:
    """Write ``arrays`` to ``path`` as .npz, atomically (engine/atomic.py); ``what`` names
    the result in errors ("a Trajectory")."""
    write_atomic(path, lambda fh: np.savez(fh, **arrays), what, ".npz")


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
