"""A stored variant, rebuilt and written as files for use outside this tool.

``variant.export_variant`` rebuilds it from the weights cache (never retraining) and writes
safetensors, a ``torch.export`` program, ONNX and a model card, each verified.
"""

__all__ = ["variant"]
