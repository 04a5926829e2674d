"""Initial-particle rules shared by the Monte Carlo engines.

Particles come in antithetic pairs that share Z^U and carry opposite Z^{nV}
(docs/theory.md §2): correlated draws from the right initial law (particles
interact only through expectations) that make the Monte Carlo f̊_0 exactly 0.
"""
from __future__ import annotations


def antithetic_count(particles: int, paired: bool = True) -> int:
    """The particle count actually used: ``particles`` rounded up to even when paired."""
    return particles + particles % 2 if paired else particles
