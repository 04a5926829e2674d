"""Save and load the studies' results (:class:`ConvergenceStudy`, :class:`LRSweep`,
:class:`DepthSweep`, :class:`CoordCheck`, :class:`DepthCheck`) as one .npz file each.

A result is a frozen dataclass of numbers, strings, tuples, dicts, NumPy arrays,
Trajectories and other results.  Its structure is written as JSON and its arrays (the
Trajectories' included) as the file's members, so a loaded result is equal to the saved
one field by field — dict keys keep their types (width 64 stays the int 64 beside the
limit's "inf"), floats their every bit, NaN and ±∞ included.  Only the result classes
registered here are rebuilt: a file names classes, never code to import.
"""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from ..engine.npz import read_npz, write_npz
from ..engine.trajectory import Trajectory
from ..errors import TPError

#: class name -> class, of every dataclass a saved result may hold (filled by @saved)
_CLASSES: dict = {}
_FORMAT = 1


def saved(cls):
    """Register a result dataclass and give it ``save(path)`` and ``load(path)``."""
    _CLASSES[cls.__name__] = cls

    def save(self, path) -> None:
        """Write this result to ``path`` (.npz), atomically; :meth:`load` reads it back
        equal field by field (tp_limits/analysis/saving.py)."""
        arrays: dict = {}
        tree = _encode(self, arrays)
        arrays["result_json"] = np.array(json.dumps({"format": _FORMAT, "result": tree}))
        write_npz(path, arrays, f"a {cls.__name__}")

    def load(klass, path):
        """Read a result written by ``save``; a file of another kind is a TPError."""
        what = f"a {klass.__name__}"
        data = read_npz(path, what, f"{klass.__name__}.save")
        if "result_json" not in data:
            raise TPError(f"{path!r} is an .npz file but not a saved result (a Trajectory? "
                          "read it with tp.Trajectory.load)")
        try:
            head = json.loads(str(data["result_json"]))
            out = _decode(head["result"], data)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise TPError(f"{path!r}: the saved result cannot be read ({exc})") from None
        if not isinstance(out, klass):
            raise TPError(f"{path!r} holds a {type(out).__name__}, not {what}: read it "
                          f"with tp.{type(out).__name__}.load")
        return out

    cls.save = save
    cls.load = classmethod(load)
    return cls


def _encode(obj, arrays: dict):
    """JSON-able tree of ``obj``; its arrays go into ``arrays`` under fresh names."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)          # JSON has no NaN or ±∞, and repr keeps every bit
        return x if math.isfinite(x) else {"float": repr(x)}
    if isinstance(obj, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {"array": key}
    if isinstance(obj, Trajectory):
        prefix = f"t{len(arrays)}"
        parts = obj.to_arrays()
        arrays.update({f"{prefix}/{k}": v for k, v in parts.items()})
        return {"trajectory": prefix}
    if isinstance(obj, tuple):
        return {"tuple": [_encode(x, arrays) for x in obj]}
    if isinstance(obj, list):
        return {"list": [_encode(x, arrays) for x in obj]}
    if isinstance(obj, dict):
        return {"dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if dataclasses.is_dataclass(obj) and type(obj).__name__ in _CLASSES:
        return {"class": type(obj).__name__,
                "fields": {f.name: _encode(getattr(obj, f.name), arrays)
                           for f in dataclasses.fields(obj)}}
    raise TPError(f"cannot save a {type(obj).__name__} inside a result")


def _decode(tree, arrays: dict):
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if "float" in tree:
        return float(tree["float"])
    if "array" in tree:
        return arrays[tree["array"]]
    if "trajectory" in tree:
        prefix = tree["trajectory"] + "/"
        return Trajectory.from_arrays({k[len(prefix):]: v for k, v in arrays.items()
                                       if k.startswith(prefix)}, "a saved Trajectory")
    if "tuple" in tree:
        return tuple(_decode(x, arrays) for x in tree["tuple"])
    if "list" in tree:
        return [_decode(x, arrays) for x in tree["list"]]
    if "dict" in tree:
        return {_decode(k, arrays): _decode(v, arrays) for k, v in tree["dict"]}
    if tree.get("class") in _CLASSES:
        return _CLASSES[tree["class"]](**{k: _decode(v, arrays)
                                          for k, v in tree["fields"].items()})
    raise ValueError(f"an unknown entry {str(tree)[:60]}")
