"""A schedule: one level per group of one technique, as a JSON document a person can read
and edit (``compression-bench sensitivity --max-drop`` writes one)::

    {"model": "seed_cnn", "technique": "prune.channel", "groups": {"0": 0.5, "2": 0.25}}

A group is named by its root module. For pruning a level is the fraction of the group's
channels (``prune.channel``) or of the layer's weights (``prune.l1``) removed, 0 leaving it
whole; for INT8 a group is quantized (1) or kept float (0). Any other key (the data set, the
map's prediction, the budget it was chosen for) travels with the schedule untouched, so a
variant's config says what was predicted beside what was applied.

Torch-free: the techniques' settings validate a schedule with it, and so can the dashboard.
"""

from __future__ import annotations

import hashlib
import json

# technique -> (the settings field and value it implies, the levels a group may take)
SCHEDULE_TECHNIQUES = {
    "prune.channel": ("prune", "method", "channel"),
    "prune.l1": ("prune", "method", "l1"),
    "int8.static": ("int8", "mode", "static"),
    "int8.dynamic": ("int8", "mode", "dynamic"),
}
PRUNE_LEVELS = (0.0, 1.0)   # [0, 1): a group keeps at least one channel or weight
INT8_LEVELS = (0, 1)        # kept float, quantized


def parse_schedule(value) -> dict:
    """The schedule document from its JSON text (or a dict); ValueError names what is wrong
    with it and what is accepted."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"a schedule must be JSON ({exc.msg} at line {exc.lineno})") \
                from None
    if not isinstance(value, dict):
        raise ValueError(f"a schedule must be a JSON object with technique and groups; got "
                         f"{type(value).__name__}")
    technique = value.get("technique")
    if technique not in SCHEDULE_TECHNIQUES:
        raise ValueError(f"a schedule's technique must be one of "
                         f"{', '.join(SCHEDULE_TECHNIQUES)}; got {technique!r}")
    groups = value.get("groups")
    if not isinstance(groups, dict) or not groups:
        raise ValueError("a schedule's groups must be a non-empty object {root module: level}")
    for root, level in groups.items():
        check_level(technique, root, level)
    return value


def check_level(technique: str, root, level) -> None:
    if not isinstance(root, str) or not root or "\x00" in root:
        raise ValueError(f"a schedule names its groups by module name; got {root!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise ValueError(f"group {root}: a level must be a number; got {level!r}")
    if technique.startswith("int8."):
        if level not in INT8_LEVELS:
            raise ValueError(f"group {root}: an INT8 schedule's level is 1 (quantized) or 0 "
                             f"(kept float); got {level!r}")
    elif not PRUNE_LEVELS[0] <= level < PRUNE_LEVELS[1]:
        raise ValueError(f"group {root}: a pruning level must be in [0, 1) (the fraction "
                         f"removed); got {level!r}")


def schedule_levels(value) -> dict[str, float]:
    """{root: level} of a schedule (its JSON text or document)."""
    return {root: float(level) for root, level in parse_schedule(value)["groups"].items()}


def canonical(value) -> str:
    """The schedule as one canonical JSON text (sorted keys): the same schedule, the same
    text, whatever the file's layout."""
    return json.dumps(parse_schedule(value), sort_keys=True, separators=(",", ":"))


def digest(value) -> str:
    """A short name for what a schedule applies (its technique and levels, not its notes)."""
    doc = parse_schedule(value)
    key = json.dumps([doc["technique"], sorted(schedule_levels(doc).items())])
    return hashlib.sha256(key.encode()).hexdigest()[:8]
