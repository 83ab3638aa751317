"""Measurements, by the same code for every variant on the same inputs.

Latency with its raw samples and pinned threads (``latency``) on cores claimed across the
product's processes (``cores``, torch-free), peak memory and the bytes a forward moves
(``memory``), the shipped size (``size``), the device's peaks (``peaks``) and the roofline's
arithmetic (``roofline``, torch-free), what the machine and the process hold
(``machine``: memory available, the data segment and its hard limit), and the environment card
every figure is stored with (``environment``). A language model's quality paired with its
baseline on the same tokens (``lm_quality``) and the speed of its generation (``lm_speed``).
"""

__all__ = ["cores", "environment", "latency", "machine", "memory", "peaks", "roofline", "size"]
