"""Low-rank adapters (LoRA) in the infinite-width limit (docs/theory.md §16).

* :mod:`.exponents`: the width exponents of an adapter's fine-tuning, exact
  (:func:`classify_adapter`, :func:`maximal_rates`, :func:`best_shared_rate`);
* :mod:`.adapter`: the adapter's own hyperparameters, shared by the networks below;
* :mod:`.toy`: LoRA+'s toy network with the adapter as its only trained layer, and its task;
* :mod:`.pretrained`: an MLP pretrained on one task by the package's engines (width n or
  the deep limit), then adapted on one of its matrices; :mod:`.upper`: the frozen layers
  above an adapted matrix below W^L (matrices, or the deep limit's run continued);
* :mod:`.engine`: fine-tuning at width n and in the limit (one particle system, with the
  Gaussian Z_A⁰ drawn from its law or given); :mod:`.exact`: the closed-form limit for
  φ = id and SGD;
* :mod:`.coord_check`, :mod:`.sweep`: the exponents measured, and the optimal ratio
  η_B*/η_A* at every width and at ∞.
"""
from .coord_check import AdapterCoordCheck, adapter_coord_check
from .exact import exact_limit
from .adapter import Adapter
from .exponents import AdapterClass, best_shared_rate, classify_adapter, maximal_rates
from .engine import LoRARun, fine_tune, pretrained_bases
from .pretrained import Base, PretrainedLoRA, pretrain
from .sweep import RateSweep, rate_sweep
from .toy import LoRAToy, SineTask, input_kernel, sine_task

__all__ = ["AdapterClass", "classify_adapter", "maximal_rates", "best_shared_rate", "LoRAToy",
           "SineTask", "sine_task", "input_kernel", "LoRARun", "fine_tune", "exact_limit",
           "AdapterCoordCheck", "adapter_coord_check", "RateSweep", "rate_sweep", "Adapter",
           "PretrainedLoRA", "Base", "pretrain", "pretrained_bases"]
