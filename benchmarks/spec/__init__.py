"""What is asked and what is allowed: self-validating, torch-free configs.

A sweep (``sweep.SweepSpec``) and its variants (``variant.VariantSpec``, planned from values and
axes by ``plan``), the data sets' registry (``datasets``: names, channels, labels, where their
loaders are), the data-parallel benchmark's config (``distributed``), the operator's limits
(``limits``) and folders (``folders``), and the exception cancelled work raises (``cancel``).
Nothing here imports torch or numpy: the dashboard validates its forms with these before it
submits anything, and every refusal is one ``ValueError`` line naming the field and the
accepted values.
"""

__all__ = ["cancel", "datasets", "distributed", "folders", "limits", "plan", "sweep",
           "variant"]
