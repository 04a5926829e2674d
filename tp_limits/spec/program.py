"""The network as a program: its layers, and the one walk every engine takes through them
(docs/theory.md §14).

A Tensor Program is a straight-line program of matrix products, coordinatewise functions,
averages and linear combinations of width-n vectors.  The networks here are such programs
with one line per layer l = 1..L (0-based ``index`` 0..L−1 below):

    v^l = W^l x^{l−1}                      the layer's product (an engine's own arithmetic)
    v^l ← v^l + b^l                        with a bias (a weight whose input is 1, §13)
    h^l = h^{s_l} + c_l v^l                at a residual block's output (skip from s_l, §12)
    x^l = φ(N_l(h^l))                      with a normalization N_l (a layer kind, §14.3)
    x^l = N_l(h^l)                         on a linear layer (φ inside the branches, §12.7)

and the readout f = α (W^{L+1} x^L + b^{L+1}).  :class:`Layer` holds one line's structure,
:class:`Program` the L + 1 of them, and its methods are the walk, written once:
:meth:`Program.forward` (h^1..h^L and x^0..x^L), :meth:`Program.output` (f),
:meth:`Program.backward` (δh^L down to δh^1, handing every layer's backward vector to the
engine) and :meth:`Program.readout_gradient`.

An engine supplies the operations on its own representation of a width-n vector — arrays
of a finite network's coordinates, Monte Carlo particles, coefficient vectors over Gaussian
primitives, kernel matrices over input pairs, torch tensors — as an object ``ops``:

    product(l, x), product_T(l, g)     W^l x and W^lᵀ g
    add_bias(l, v)                     v + b^l (l = L: the readout's)
    residual(h_skip, c, v)             h^{s} + c v        scale(c, g)   c g
    pre_activation(l, h)               h^l complete (a divergence check; returns h)
    activation(l, n), activation_backward(l, n, dx)      φ(n) and dx φ′(n)
    identity(l, n), identity_backward(l, n, dx)          n and dx, on a linear layer
    readout(x), finish_output(f)       W^{L+1} x, then α f and its checks
    gradient(l, g), bias_gradient(l, g)                 layer l's backward vector g
    representation                     "rows", "coefficients", "kernel" or "torch"

and a parameter-free layer kind (a normalization) supplies its arithmetic on each
representation, or refuses one with the reason (:meth:`Program.refusal`).  So the engines
never test for a skip, a branch multiplier, a bias or a normalization themselves.
"""
from __future__ import annotations

from dataclasses import dataclass

from .residual import Carried

#: the representations of a width-n vector the engines use (see the module docstring)
REPRESENTATIONS = ("rows", "coefficients", "kernel", "torch")

#: the representations that have no bias, and why
BIAS_REFUSALS = {
    "torch": "to_torch builds networks without biases: the readout's bias would sit outside "
             "MuReadout's output multiplier, where this package puts it inside "
             "(docs/theory.md §13); build the MLP with bias=None"}


@dataclass(frozen=True)
class Layer:
    """One line of the program: the weight W^{index+1} (0-based ``index``), whether a bias
    follows its product, the residual skip (``skip``: the 0-based pre-activation it adds,
    −1 for none) with the branch multiplier ``branch`` on product and bias, the
    normalization ``norm`` (a layer kind of spec/layers, or None) before φ, and whether φ
    follows (``phi``; False: x^l = N(h^l), a linear layer)."""

    index: int
    bias: bool = False
    skip: int = -1
    branch: float = 1.0
    norm: object = None
    phi: bool = True


@dataclass(frozen=True)
class Parameter:
    """A trained array of the network: the weight (``kind`` "W") or the bias ("b") of layer
    ``layer`` (0-based).  ``name`` is how components and reports call it (W1, b1, …)."""

    kind: str
    layer: int

    @property
    def name(self) -> str:
        return f"{self.kind}{self.layer + 1}"

    @property
    def is_bias(self) -> bool:
        return self.kind == "b"

    @property
    def key(self):
        """The component key of kernels and reports: the layer number l + 1 for a weight,
        "b{l+1}" for a bias."""
        return self.name if self.is_bias else self.layer + 1

    def constants(self, const):
        """This parameter's numbers in an MLP's constants (the weights', or the biases')."""
        return const.bias if self.is_bias else const

    def input(self, xs, ones):
        """What the parameter multiplies: x^{l} (the layer's input) for a weight, ``ones``
        (the constant 1) for a bias."""
        return ones if self.is_bias else xs[self.layer]


@dataclass(frozen=True)
class Program:
    """The L + 1 layers of a network (the last is the readout) and the walk through them."""

    layers: tuple

    @property
    def L(self) -> int:
        return len(self.layers) - 1

    @property
    def hidden(self) -> tuple:
        """The layers that make h^1..h^L (the input layer and the hidden matrices)."""
        return self.layers[:-1]

    @property
    def readout(self) -> Layer:
        return self.layers[-1]

    # -- what the program holds ---------------------------------------------------------
    @property
    def parameters(self) -> tuple:
        """Every trained array, in the order a network draws them: W1..W{L+1}, then the
        biases b1.. in layer order."""
        weights = tuple(Parameter("W", layer.index) for layer in self.layers)
        return weights + tuple(Parameter("b", layer.index) for layer in self.layers
                               if layer.bias)

    @property
    def bias_layers(self) -> tuple:
        """The 0-based layers whose product a bias follows (the readout's is L)."""
        return tuple(layer.index for layer in self.layers if layer.bias)

    @property
    def hidden_bias_layers(self) -> tuple:
        """The 0-based layers below the readout whose product a bias follows."""
        return self.bias_layers[:len(self.bias_layers) - self.readout.bias]

    @property
    def readout_bias_layers(self) -> tuple:
        """(L,) when the readout has a bias, else ()."""
        return self.bias_layers[len(self.hidden_bias_layers):]

    @property
    def plain(self) -> bool:
        """A plain MLP: no bias, skip, normalization or linear layer anywhere (the fused
        one-hidden-layer sweep and the tangent Ż estimator take such programs only)."""
        return not any(layer.bias or layer.skip >= 0 or layer.norm is not None
                       or not layer.phi for layer in self.layers)

    @property
    def norms(self) -> tuple:
        """The distinct normalizations of the program's layers."""
        out = []
        for layer in self.hidden:
            if layer.norm is not None and layer.norm not in out:
                out.append(layer.norm)
        return tuple(out)

    def refusal(self, representation: str) -> str | None:
        """Why an engine working on ``representation`` cannot run this program (None: it
        can): the first layer kind without arithmetic for it, with the kind's reason."""
        if self.bias_layers and representation in BIAS_REFUSALS:
            return BIAS_REFUSALS[representation]
        for norm in self.norms:
            why = norm.refusal(representation)
            if why:
                return why
        return None

    # -- the walk -------------------------------------------------------------------------
    def forward(self, x0, ops):
        """(hs, xs): h^1..h^L and x^0..x^L of the input ``x0`` (the engine's representation
        of the inputs), each layer as the module docstring writes it."""
        hs, xs = [], [x0]
        for layer in self.hidden:
            v = ops.product(layer.index, xs[-1])
            if layer.bias:
                v = ops.add_bias(layer.index, v)
            if layer.skip >= 0:
                v = ops.residual(hs[layer.skip], layer.branch, v)
            h = ops.pre_activation(layer.index, v)
            hs.append(h)
            n = self._normalized(layer, h, ops)
            xs.append(ops.activation(layer.index, n) if layer.phi
                      else ops.identity(layer.index, n))
        return hs, xs

    def output(self, x, ops):
        """f of the last hidden layer's x^L: α (W^{L+1} x + b^{L+1})."""
        f = ops.readout(x)
        if self.readout.bias:
            f = ops.add_bias(self.L, f)
        return ops.finish_output(f)

    def readout_gradient(self, g, ops) -> None:
        """The readout's backward vector (α χ, or the engine's form of it) to its weight and
        bias."""
        ops.gradient(self.L, g)
        if self.readout.bias:
            ops.bias_gradient(self.L, g)

    def backward(self, hs, dx, ops):
        """δh^1, from δx^L = ``dx`` and the forward pass's ``hs``: at each layer from L down,
        its backward vector g (c δh^l in a residual branch, whose skip hands δh^l to the
        layer it starts from) goes to ``ops.gradient`` (and ``bias_gradient``), after
        W^lᵀ g has been taken, so an engine may update W^l on receiving it."""
        dh = self._activation_backward(self.hidden[-1], hs[-1], dx, ops)
        carried = Carried()
        for layer in reversed(self.hidden):
            l, g = layer.index, dh
            if layer.skip >= 0:
                g = ops.scale(layer.branch, dh)
                carried.hand(layer.skip, dh)
            below = ops.product_T(l, g) if l > 0 else None
            ops.gradient(l, g)
            if layer.bias:
                ops.bias_gradient(l, g)
            if l > 0:
                dh = carried.receive(l - 1, self._activation_backward(
                    self.hidden[l - 1], hs[l - 1], below, ops))
        return dh

    def product_of(self, hs, l: int, ops):
        """W^l x^{l−1} of layer ``l`` recovered from its pre-activation: (h^l − h^{s})/c at a
        block's output, less the bias (the inverse of the forward line, for statistics)."""
        layer, v = self.layers[l], hs[l]
        if layer.skip >= 0:
            v = ops.unresidual(hs[layer.skip], layer.branch, v)
        if layer.bias:
            v = ops.remove_bias(l, v)
        return v

    # -- a layer's activation, with its normalization ---------------------------------------
    @staticmethod
    def _normalized(layer, h, ops):
        if layer.norm is None:
            return h
        return layer.norm.forward(ops.representation, h, ops)

    def _activation_backward(self, layer, h, dx, ops):
        """δh of layer ``layer`` from δx = ``dx``: dx φ′(N(h)) (dx on a linear layer), then
        back through N."""
        back = ops.activation_backward if layer.phi else ops.identity_backward
        if layer.norm is None:
            return back(layer.index, h, dx)
        n = layer.norm.forward(ops.representation, h, ops)
        return layer.norm.backward(ops.representation, h, back(layer.index, n, dx), ops)
