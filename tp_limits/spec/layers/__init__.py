"""Layer kinds without parameters, one module each: a kind holds its arithmetic on every
representation of a width-n vector that the engines use (spec/program.py) and its width
exponents' effect, or refuses a representation with the reason.

* :class:`~.layernorm.LayerNorm`, :class:`~.rmsnorm.RMSNorm`: normalizations before φ
  (docs/theory.md §14.3).
"""
from .layernorm import LayerNorm
from .rmsnorm import RMSNorm

#: MLP(norm=...) name -> kind
NORMS = {kind.name: kind for kind in (LayerNorm, RMSNorm)}

__all__ = ["LayerNorm", "RMSNorm", "NORMS"]
