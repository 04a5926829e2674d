"""The optimizer inside the compiled one-hidden-layer sweep: its coordinate rule,
dispatched by tag (docs/theory.md §10.2, §10.5).

Z^U and Z^{nV} are particle-local, so under every optimizer each of their entries
moves by the optimizer's rule for one coordinate (spec/optimizers/base.py), fed the
increment the sweep accumulates.  The sweep takes the rule as a tag, a tuple of
zeros whose length is one more than the rule's position in the registry, so it is
compiled once per rule with only that rule inside; the functions below pick, while
compiling, the rule's scalar ``step`` and its layout.  Its state lives beside the
particles as one (slots·rows, N) array per particle group: slot s of row r is row
s·rows + r.  A new optimizer is a new rule in its own module; nothing here changes.
"""
from __future__ import annotations

from functools import lru_cache

from numba import njit
from numba.core.errors import TypingError
from numba.extending import overload

from ...spec.optimizers.base import rule_code, rule_of_code

#: state slots per coordinate that the compiled sweep carries (the registry's rules have
#: at most two: Adam's moments)
MAX_SLOTS = 2


def rule_tag(rule) -> tuple:
    """The sweep's handle for a coordinate rule: (registry position + 1) zeros."""
    return (0,) * (rule_code(rule) + 1)


@lru_cache(maxsize=None)
def _step(fn):
    return njit(inline="always", fastmath=True, error_model="numpy")(fn)


def rule_plain(tag):
    """Whether the rule is z ← z − g (a compile-time constant): the sweep then subtracts
    the increment where it forms it, and carries no state."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(rule_plain, inline="always")
def _rule_plain_for(tag):
    value = rule_of_code(len(tag) - 1).plain
    return lambda tag: value


def rule_rows(tag, Z, za, T, S, sa, m, h):
    """Z[k, za:za + m] moved by the rule fed T[k, :m], with the state rows
    S[s·R + k, sa:sa + m] (R rows of Z), for every row k of Z (compiled code only)."""
    raise NotImplementedError("only callable from Numba-compiled code")


@overload(rule_rows, jit_options=dict(fastmath=True, error_model="numpy"))
def _rule_rows_for(tag, Z, za, T, S, sa, m, h):
    rule = rule_of_code(len(tag) - 1)
    k = len(rule.slots)
    if rule.plain:
        def plain(tag, Z, za, T, S, sa, m, h):
            for r in range(Z.shape[0]):
                Zr, Tr = Z[r, za:za + m], T[r]
                for j in range(m):
                    Zr[j] -= Tr[j]
        return plain
    step = _step(rule.step)
    # one loop per slot count, the innermost over particles (it vectorizes)
    if k == 0:
        def none(tag, Z, za, T, S, sa, m, h):
            for r in range(Z.shape[0]):
                Zr, Tr = Z[r, za:za + m], T[r]
                for j in range(m):
                    Zr[j] = step(Zr[j], Tr[j], h)
        return none
    if k == 1:
        def one(tag, Z, za, T, S, sa, m, h):
            for r in range(Z.shape[0]):
                Zr, Tr, S0 = Z[r, za:za + m], T[r], S[r, sa:sa + m]
                for j in range(m):
                    Zr[j], S0[j] = step(Zr[j], Tr[j], S0[j], h)
        return one
    if k == 2:
        def two(tag, Z, za, T, S, sa, m, h):
            R = Z.shape[0]
            for r in range(R):
                Zr, Tr = Z[r, za:za + m], T[r]
                S0, S1 = S[r, sa:sa + m], S[R + r, sa:sa + m]
                for j in range(m):
                    Zr[j], S0[j], S1[j] = step(Zr[j], Tr[j], S0[j], S1[j], h)
        return two
    raise TypingError(f"the coordinate rule {rule.name!r} has {k} state slots; the compiled "
                      f"sweep carries at most {MAX_SLOTS} (raise MAX_SLOTS in rule.py)")
