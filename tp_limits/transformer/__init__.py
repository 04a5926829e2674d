"""Transformers: a pre-norm transformer at width n and in its infinite-width limit, the
width exponents of its attention, and a small language task (docs/theory.md §17).

* :mod:`.model`: the architecture and its abc-parametrization (:class:`Transformer`);
  :mod:`.parametrization`: the exponents of every parameter kind (μP and standard practice);
* :mod:`.network`: the finite network's parameters, forward and backward passes;
  :mod:`.train`: full-batch SGD or Adam at width n (:func:`train_transformer`, a
  :class:`~tp_limits.Trajectory`);
* :mod:`.limit`: the infinite-width limit of a μP transformer under SGD
  (:func:`simulate_transformer_limit`), one walk over two representations of a Z-variable:
  :mod:`.particles` (Monte Carlo) and :mod:`.coefficients` (exact, φ = id), whose hidden
  matrices share :mod:`.hidden_matrix`;
* :mod:`.exponents`: the attention logits' exponents (:func:`classify_attention`), and
  :mod:`.coord_check` measuring them (:func:`attention_coord_check`);
* the kernel regime (1/d attention): :mod:`.kernels` (:func:`transformer_nngp`,
  :func:`transformer_ntk`), :mod:`.empirical_ntk` (a finite network's tangent kernel) and
  :mod:`.kernel_descent` (:func:`transformer_kernel_descent`);
* :mod:`.lr_sweep`: the optimal rate at each width (:func:`transformer_lr_sweep`);
* :mod:`.tasks`: a random Markov chain over a small vocabulary (:func:`markov_task`).
"""
from .coord_check import AttentionCoordCheck, attention_coord_check
from .empirical_ntk import empirical_transformer_ntk
from .exponents import AttentionClass, classify_attention
from .kernel_descent import transformer_initial_outputs, transformer_kernel_descent
from .kernels import transformer_nngp, transformer_ntk
from .limit import simulate_transformer_limit
from .lr_sweep import TransformerSweep, transformer_lr_sweep
from .model import Transformer
from .tasks import TokenTask, markov_task
from .train import train_transformer

__all__ = ["Transformer", "train_transformer", "classify_attention", "AttentionClass",
           "attention_coord_check", "AttentionCoordCheck", "markov_task", "TokenTask",
           "transformer_lr_sweep", "TransformerSweep", "simulate_transformer_limit",
           "transformer_nngp", "transformer_ntk", "empirical_transformer_ntk",
           "transformer_kernel_descent", "transformer_initial_outputs"]
