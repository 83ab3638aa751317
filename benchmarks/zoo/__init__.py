"""Where models and data come from.

Model sources (``models``: the zoo and users' files; ``hub``: torchvision and timm, with
pretrained weights from the local caches only; ``source``: what a source answers), the
catalogues the menus list without importing torch (``catalogue`` and ``catalogue.json``),
checkpoints read as data, never code (``checkpoints``), the registered data sets' loaders,
held in memory as uint8 (``datasets``; an image folder in ``imagefolder``), and how images
become a model's inputs (``inputs``). Causal language models (``lm``; a package's GGUF file
in ``gguf``, a local Hugging Face folder in ``hf_folder``, their tokenizers in ``tokens``)
read text data sets cut into windows (``text``).
"""

__all__ = ["catalogue", "checkpoints", "datasets", "gguf", "hf_folder", "hub", "imagefolder",
           "inputs", "lm", "models", "source", "text", "tokens"]
