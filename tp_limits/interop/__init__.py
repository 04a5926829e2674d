"""Ways in from other libraries: a `mup` configuration (mup_config.py, pure Python) and
PyTorch modules (torch_model.py for MLPs, torch_transformer.py for transformers; torch
imported only when called)."""
from .mup_config import MupTranslation, from_mup
from .torch_model import TorchModel, from_torch, to_torch
from .torch_transformer import TorchTransformer, transformer_to_torch

__all__ = ["from_mup", "MupTranslation", "to_torch", "from_torch", "TorchModel",
           "TorchTransformer", "transformer_to_torch"]
