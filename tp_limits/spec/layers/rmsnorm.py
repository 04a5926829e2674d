"""RMSNorm as a layer kind: N(h) = h/√(mean h² + ε) over the width, before φ, without gains
(docs/theory.md §14.3): LayerNorm's arithmetic without the centering, on every
representation (layernorm.py), so its limit is N(Z) = Z/√(E Z² + ε) and its backward
pass Z^{δh} = (Z^{δn} − Z^y E[Z^{δn} Z^y])/s."""
from __future__ import annotations

from dataclasses import dataclass

from .layernorm import LayerNorm


@dataclass(frozen=True)
class RMSNorm(LayerNorm):
    """N(h) = h/√(mean h² + ``eps``) over the width."""

    name = "rms"
    center = False

    def torch(self, h, ops):
        import torch.nn.functional as F
        return F.rms_norm(h, h.shape[-1:], eps=self.eps)
