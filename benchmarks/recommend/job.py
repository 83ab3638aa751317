"""A recommendation as a queue job's payload (plain JSON), and back: what the dashboard's
panel submits and the worker runs. Torch-free; every part validates itself on the way back,
so a bad payload fails the job in one line before anything loads."""

from __future__ import annotations

from benchmarks.recommend.request import RecommendRequest
from benchmarks.recommend.space import search_space
from benchmarks.run.checks import technique_preflight
from benchmarks.spec.sweep import SweepSpec
from benchmarks.spec.variant import BASELINE


def payload(spec: SweepSpec, request: RecommendRequest, choices: dict, enabled,
            runtimes=("eager",)) -> dict:
    """``choices``: {(technique, field): value or values} as the technique form makes them;
    ``enabled``: the techniques switched on (none: every technique); ``runtimes``: where a
    trial may run."""
    # Refused here, on the page: a space with no knob, or a technique asked for by name that
    # cannot apply to this model (distill with no student to distil into).
    search_space(choices, enabled, runtimes).fitted(
        lambda name, settings, chain: technique_preflight(spec, name, settings, chain))
    base = SweepSpec.from_dict({**spec.to_dict(), "variants": [BASELINE.to_dict()]})
    return {"model": spec.model, "dataset": spec.dataset, "spec": base.to_dict(),
            "request": request.to_dict(), "enabled": sorted(enabled),
            "runtimes": list(runtimes or ("eager",)),
            "choices": {f"{t}.{f}": list(v) if isinstance(v, (list, tuple)) else v
                        for (t, f), v in choices.items()}}


def from_payload(data: dict):
    """(request, spec, space) of a job's payload."""
    request = RecommendRequest.from_dict(data["request"])
    spec = SweepSpec.from_dict(data["spec"])
    choices = {tuple(key.split(".", 1)): tuple(v) if isinstance(v, list) else v
               for key, v in (data.get("choices") or {}).items()}
    return request, spec, search_space(choices, data.get("enabled") or (),
                                       tuple(data.get("runtimes") or ("eager",)))


def asked_again(run: dict, changes: dict) -> dict:
    """The payload of a stored recommendation (``run``: a store's run with its
    ``recommendation``) asked again with ``changes`` to its request (more trials, another
    margin, a new split seed): its model, data, budgets and space as they were. One line
    where the run predates what this needs (its space's ``asked``)."""
    block = run.get("recommendation") or {}
    asked = (block.get("space") or {}).get("asked")
    if asked is None:
        raise ValueError("this recommendation was stored before its space could be asked "
                         "again: run it from the Recommend panel")
    request = RecommendRequest.from_dict({**(block.get("request") or {}), **changes})
    spec = SweepSpec.from_dict({k: v for k, v in (run.get("spec") or {}).items()
                                if k != "recommend"})
    choices = {tuple(key.split(".", 1)): tuple(v) if isinstance(v, list) else v
               for key, v in (asked.get("choices") or {}).items()}
    return payload(spec, request, choices, asked.get("enabled") or (),
                   runtimes=tuple(asked.get("runtimes") or ("eager",)))

