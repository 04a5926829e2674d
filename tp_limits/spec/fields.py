"""The network's fields, each declared once: its experiment-file keys (type, default, doc),
how the ``[model]`` section builds the :class:`~tp_limits.MLP` argument from them, how a
run's metadata records it, and what a trajectory saved before the field existed meant.

The experiment schema (experiment/schema.py), the builder (experiment/runner.py), the
run metadata (engine/meta.py) and hence the report read :data:`MODEL_FIELDS`, so a new
field (a layer kind's option, say) is one declaration here.  Defaults of the layer specs'
own constructors (``tp.Residual``, ``tp.Bias``, the normalizations) are read from their
signatures, not written again; an error from a constructor is reported under the file's
key (``model.residual_alpha``), not the Python argument (``alpha``).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from ..errors import SpecError
from ..nonlinearities import NONLINEARITIES
from .bias import Bias
from .initializations import INITS
from .layers import NORMS
from .mlp import MLP
from .residual import Residual


@dataclass(frozen=True)
class FileKey:
    """One ``[model]`` key: its type (the schema's vocabulary), default, meaning, allowed
    values of a string key, and the constructor argument it feeds (for messages)."""

    key: str
    kind: str
    default: object
    doc: str
    choices: tuple = ()
    argument: str = ""

    @property
    def names(self) -> str:
        """How a constructor's message names what this key feeds (the key itself for the
        MLP's own arguments)."""
        return self.argument or self.key


@dataclass(frozen=True)
class ModelField:
    """A field of the network: ``keys`` of the file, ``read`` (the checked key values ->
    the MLP keyword arguments), ``record`` (the MLP -> the JSON of its metadata entry) and
    ``before`` (the entry's meaning in trajectories saved before it existed)."""

    name: str
    keys: tuple
    read: Callable
    record: Callable
    before: object = None


def _default(cls, argument: str):
    return inspect.signature(cls).parameters[argument].default


def _plain(name: str) -> Callable:
    return lambda m: {name: m[name]}


def _absent_unless(m: dict, switch: str, keys) -> None:
    """The keys that qualify ``switch`` are refused when it is off, naming the first."""
    for k in keys:
        if m[k.key] != k.default:
            raise SpecError(f"model.{k.key} needs model.{switch}")


def _residual(m: dict) -> dict:
    if m["residual_alpha"] is None:
        _absent_unless(m, "residual_alpha (the branch exponent of the skip connections)",
                       RESIDUAL_KEYS[1:])
        return {"residual": None}
    return {"residual": Residual(m["residual_alpha"], m["residual_gamma"],
                                 m["residual_block_depth"], m["residual_phi_inside"])}


def _bias(m: dict) -> dict:
    if not m["bias"]:
        _absent_unless(m, "bias = true", BIAS_KEYS[1:])
        return {"bias": None}
    values = (m[k.key] for k in BIAS_KEYS[1:])
    return {"bias": Bias(*(tuple(v) if isinstance(v, list) else v for v in values))}


RESIDUAL_KEYS = (
    FileKey("residual_alpha", "number", None, "skip connections around W^2..W^L with branch "
            "multiplier K^(−alpha), K = L − 1 (docs/theory.md §12); absent: a plain MLP",
            argument="alpha"),
    FileKey("residual_gamma", "number", _default(Residual, "gamma"), "with residual_alpha: the "
            "blocks' learning rate times K^(−gamma)", argument="gamma"),
    FileKey("residual_block_depth", "int", _default(Residual, "block_depth"), "with "
            "residual_alpha: matrices per branch (1, or 2: h + K^(−alpha) W_b φ(W_a φ(h)))",
            argument="block_depth"),
    FileKey("residual_phi_inside", "bool", _default(Residual, "phi_inside"), "with "
            "residual_alpha and block_depth 2: φ only inside the branches, a transformer's "
            "MLP block h + K^(−alpha) W_b φ(W_a N(h)), the readout on N(h^L) "
            "(docs/theory.md §12.7)", argument="phi_inside"),
)
BIAS_KEYS = (
    FileKey("bias", "bool", False, "a bias on every hidden layer and the readout, each a "
            "weight with input 1 (docs/theory.md §13)"),
    FileKey("bias_sigma", "number|numbers", _default(Bias, "sigma"), "with bias: init "
            "constants σ_b of the hidden biases (scalar or L values)", argument="Bias sigma"),
    FileKey("bias_lr_mult", "number|numbers", _default(Bias, "lr_mult"), "with bias: rate "
            "multipliers of the hidden biases and the readout's (scalar or L+1 values)",
            argument="Bias lr_mult"),
    FileKey("bias_readout", "bool", _default(Bias, "readout"), "with bias: whether the readout "
            "has one", argument="Bias readout"),
)
NORM_KEYS = (
    FileKey("norm", "str", None, "normalize every hidden pre-activation over the width before "
            "φ: 'layer' (LayerNorm) or 'rms' (RMSNorm), no gains; pre-norm blocks in a "
            "residual network (docs/theory.md §14); absent: none",
            choices=tuple(NORMS), argument="norm"),
    FileKey("norm_eps", "number", _default(NORMS["layer"], "eps"), "with norm: the ε of "
            "N(h) = (h − mean h)/√(var h + ε) (width-free)", argument="norm_eps"),
)

MODEL_FIELDS = (
    ModelField("phi", (FileKey("phi", "str", "tanh", "nonlinearity: "
                               + ", ".join(sorted(NONLINEARITIES)),
                               choices=tuple(sorted(NONLINEARITIES))),),
               _plain("phi"), lambda net: net.phi),
    ModelField("sigma", (FileKey("sigma", "number|numbers", 1.0,
                                 "init constants σ_l (scalar or L+1 values)"),),
               _plain("sigma"), lambda net: list(net.sigma)),
    ModelField("lr_mult", (FileKey("lr_mult", "number|numbers", 1.0,
                                   "per-layer learning-rate multipliers"),),
               _plain("lr_mult"), lambda net: list(net.lr_mult)),
    ModelField("readout_multiplier", (FileKey("readout_multiplier", "number", 1.0,
                                              "output multiplier α"),),
               _plain("readout_multiplier"), lambda net: net.readout_multiplier),
    ModelField("output_scale", (FileKey("output_scale", "number", 1.0,
                                        "init-scale knob s (docs/theory.md §7.3)"),),
               _plain("output_scale"), lambda net: net.output_scale),
    ModelField("init", (FileKey("init", "str", "gaussian", "initial matrices: 'gaussian', "
                                "'spectral' (rescaled to spectral norm σ√(fan_out/fan_in)) or "
                                "'orthogonal' (docs/theory.md §11.6)", choices=INITS),),
               _plain("init"), lambda net: net.init, before="gaussian"),
    ModelField("residual", RESIDUAL_KEYS, _residual,
               lambda net: None if net.residual is None else net.residual.to_json()),
    ModelField("bias", BIAS_KEYS, _bias,
               lambda net: None if net.bias is None else net.bias.to_json()),
    ModelField("norm", NORM_KEYS, lambda m: {"norm": m["norm"], "norm_eps": m["norm_eps"]},
               lambda net: None if net.norm is None else net.norm.to_json()),
)


FILE_KEYS = tuple(k for field in MODEL_FIELDS for k in field.keys)


def model_arguments(model: dict) -> dict:
    """The MLP keyword arguments of a checked ``[model]`` section (every key present, defaults
    filled): each field's ``read``, with a constructor's error reported under the file key
    of the argument it names (``model.residual_alpha = nan must be ...``)."""
    out = {}
    for field in MODEL_FIELDS:
        try:
            out.update(field.read(model))
        except SpecError as exc:
            raise SpecError(file_message(str(exc), field.keys)) from None
    return out


def mlp_from_file(param, d_in: int, d_out: int, model: dict) -> MLP:
    """The MLP of an experiment file's ``[model]`` section; every error names the file key."""
    kwargs = model_arguments(model)
    try:
        return MLP(param, d_in, d_out, **kwargs)
    except SpecError as exc:
        raise SpecError(file_message(str(exc), FILE_KEYS)) from None


def file_message(message: str, keys) -> str:
    """``message`` with a leading constructor argument ("alpha = ...", "sigma has ...") named
    as its file key."""
    return renamed(message, {k.names: f"model.{k.key}" for k in keys})


def renamed(message: str, names: dict) -> str:
    """``message`` with a leading argument name (a key of ``names``: "lr = nan ...") replaced
    by what the user wrote (its value: "routine.lr = nan ..."): a check declared once in
    Python speaks the file's language when a file fed it."""
    for argument, key in names.items():
        if message.startswith(argument + " "):
            return key + message[len(argument):]
    return message
