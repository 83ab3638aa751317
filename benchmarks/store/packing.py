"""Raw latency samples as base64 float32 arrays (float64 where a value is not float32-exact),
not JSON text: a fast model's thousands of samples took 200 KB per variant as text."""

from __future__ import annotations

import base64
from array import array

# The variant's sample lists stored as packed arrays ("raw" block, and a distributed run's
# per-step times at the top level).
SAMPLE_KEYS = ("latency_samples_ms", "host_samples_ms", "cpu_latency_samples_ms")
TOP_SAMPLE_KEYS = ("step_ms_samples",)


def pack_floats(values: list) -> dict:
    """A list of floats as {"float32": base64} (exact for float32 values) or {"float64": ...}."""
    packed = array("f", values)
    if packed.tolist() != [float(v) for v in values]:
        return {"float64": base64.b64encode(array("d", values).tobytes()).decode()}
    return {"float32": base64.b64encode(packed.tobytes()).decode()}


def unpack_floats(value):
    """The inverse of pack_floats; a plain list (older stores) is returned as it is."""
    if not isinstance(value, dict):
        return value
    for code, kind in (("f", "float32"), ("d", "float64")):
        if kind in value:
            return array(code, base64.b64decode(value[kind])).tolist()
    return value


def packed(data: dict) -> dict:
    """A variant's dict with its sample lists packed (what the store writes)."""
    data = dict(data)
    for key in TOP_SAMPLE_KEYS:
        if isinstance(data.get(key), list) and data[key]:
            data[key] = pack_floats(data[key])
    if isinstance(data.get("raw"), dict):
        raw = data["raw"] = dict(data["raw"])
        for key in SAMPLE_KEYS:
            if isinstance(raw.get(key), list) and raw[key]:
                raw[key] = pack_floats(raw[key])
    return data


def unpacked(data: dict) -> dict:
    """The inverse of ``packed`` (what the store reads), in place."""
    for key in TOP_SAMPLE_KEYS:
        if key in data:
            data[key] = unpack_floats(data[key])
    raw = data.get("raw")
    if isinstance(raw, dict):
        for key in SAMPLE_KEYS:
            if key in raw:
                raw[key] = unpack_floats(raw[key])
    return data
