"""What the limit's two representations of a hidden matrix share (docs/theory.md §4.2,
§17.4): W_t = W_0 − η Σ_j g_j x_jᵀ, with a forward family F (the vectors x it multiplied)
and a backward family G (the g's of Wᵀg); pair j is F's row j with G's row j, and a step's
pairs join the ΔW sum once its update is made.  A product draws the new vectors' hats in
its own family and adds Ż and ΔW over the other one (``_product``, each representation's
own arithmetic)."""
from __future__ import annotations


class HiddenMatrix:
    """The pairing of the two families; subclasses supply ``F``, ``G`` and ``_product``."""

    pairs = 0
    t = 0                                # the step under way, for a divergence's report

    def _product(self, own, other, x, stored: int):
        raise NotImplementedError

    def forward(self, x, stored: int):
        """Z^{W x} for the rows x; the first ``stored`` rows join F."""
        return self._product(self.F, self.G, x, stored)

    def backward(self, g):
        """Z^{Wᵀ g} for the rows g, all of which join G."""
        return self._product(self.G, self.F, g, len(g))

    def stepped(self, rows: int) -> None:
        """This step's ``rows`` pairs join the ΔW sum."""
        self.pairs += rows
