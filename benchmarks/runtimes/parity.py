"""Output parity of a runtime cell against the same variant in eager PyTorch, on the test split.

- the largest absolute logit error, and the largest relative one (per example: the error's
  max-norm over the eager logits' max-norm, so logits near zero do not blow it up);
- top-1 agreement with its Wilson 95% interval;
- the paired accuracy test: the exact McNemar test of the runtime's per-example correctness
  against eager's (labelled data only).

Top-1 agreement says little when eager itself predicts one class for nearly every input
(random weights do): the figures then carry ``degenerate`` and a note. Parity is to be judged
on trained or pretrained weights.
"""

from __future__ import annotations

from collections import Counter

from benchmarks.report import stats

# Eager predicting one class for more than this share of the inputs: agreement is meaningless.
DEGENERATE_SHARE = 0.9
# A parity badge: agreement at least this, and no significant change in accuracy (McNemar).
AGREE_OK, AGREE_CLOSE = 0.99, 0.95


def parity(eager_logits, logits, labels=None) -> dict:
    """The parity figures of ``logits`` (a runtime's, n x classes) against ``eager_logits``
    on the same examples; ``labels`` (n,) for the paired accuracy test."""
    eager = eager_logits.float().cpu()
    other = logits.float().cpu()
    if eager.shape != other.shape:
        raise RuntimeError(f"the runtime's logits have shape {tuple(other.shape)}, eager's "
                           f"{tuple(eager.shape)}")
    n = int(eager.shape[0])
    diff = (other - eager).abs()
    per_example = diff.amax(dim=1) / eager.abs().amax(dim=1).clamp_min(1e-12)
    top_eager, top_other = eager.argmax(1), other.argmax(1)
    agree = int((top_eager == top_other).sum())
    out = {"max_abs": float(diff.max()) if n else None,
           "max_rel": float(per_example.max()) if n else None,
           "top1_agree": agree / n if n else None,
           "top1_agree_ci": list(stats.wilson_interval(agree, n)) if n else None,
           "p_value_vs_eager": None, "n": n}
    if labels is not None and n:
        right_eager = (top_eager == labels).tolist()
        right = (top_other == labels).tolist()
        b, c = stats.discordant(right, right_eager)
        out.update(p_value_vs_eager=stats.mcnemar_exact(b, c), only_runtime_right=b,
                   only_eager_right=c)
    share = Counter(top_eager.tolist()).most_common(1)[0][1] / n if n else 0.0
    if share > DEGENERATE_SHARE:
        out["degenerate"] = True
        out["note"] = (f"eager predicts one class for {share:.0%} of the inputs (random "
                       f"weights?): top-1 agreement says little here")
    out["badge"] = badge(out)
    return out


def badge(figures: dict | None) -> str:
    """"ok", "close" or "off" ("n/a" where eager is degenerate, "?" without figures): the
    grid's parity badge, stored with the figures so that the torch-free report reads it."""
    if not figures or figures.get("top1_agree") is None:
        return "?"
    if figures.get("degenerate"):
        return "n/a"
    p = figures.get("p_value_vs_eager")
    if figures["top1_agree"] >= AGREE_OK and (p is None or p >= stats.ALPHA):
        return "ok"
    if figures["top1_agree"] >= AGREE_CLOSE and (p is None or p >= stats.ALPHA):
        return "close"
    return "off"


def closer_to_fp32(float_logits, eager_logits, logits) -> dict:
    """Which quantization of the same float model is the more faithful to it: top-1
    agreement of the runtime's outputs and of eager's with the float model's, on the same
    examples, and the exact McNemar test of the paired difference. An "off" cell is then
    either a conversion that changed the model more than eager's own quantization did, or
    eager being the wrong reference (the runtime closer to fp32 than eager is); "neither,
    within noise" unless the test says otherwise."""
    reference = float_logits.float().cpu().argmax(1)
    agree_eager = (eager_logits.float().cpu().argmax(1) == reference).tolist()
    agree_runtime = (logits.float().cpu().argmax(1) == reference).tolist()
    n = len(reference)
    only_runtime, only_eager = stats.discordant(agree_runtime, agree_eager)
    p = stats.mcnemar_exact(only_runtime, only_eager)
    closer = "neither, within noise"
    if p < stats.ALPHA:
        closer = "runtime" if only_runtime > only_eager else "eager"
    return {"runtime_agree": sum(agree_runtime) / n if n else None,
            "eager_agree": sum(agree_eager) / n if n else None,
            "only_runtime_agrees": only_runtime, "only_eager_agrees": only_eager,
            "p_value": p, "closer": closer, "n": n}
