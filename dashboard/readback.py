"""What a job will run with, in one line: read back from the payload the page is about to
submit (and from the queued job), never from the widgets.

Streamlit resets a widget value that arrives out of the widget's range (tampered over the
WebSocket: epochs 10⁶, batch size 0, ratio 1.5, device ``cuda:7``) to the widget's default
without a word; a job then ran with settings the person did not choose. The page shows this
line next to Run benchmark, and the job's progress shows it again, so a value that was
replaced is in plain sight. The engine's own bounds (``benchmarks/spec``) are the ones that
bind: the page's widgets take theirs from there. Streamlit-free and torch-free.
"""

from __future__ import annotations

from dashboard.markup import no_paths


def _value(value) -> str:
    if value is None:
        return "default"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _variant(variant: dict) -> str:
    settings = [f"{field} {_value(v)}" for technique in variant.get("settings", {}).values()
                for field, v in (technique or {}).items()]
    return variant["name"] + (f" ({', '.join(settings)})" if settings else "")


def _training(p: dict) -> str:
    """What the sweep trains, in words: the baseline's epochs; or, where the baseline is the
    model as loaded (a checkpoint, or 0 epochs), that it trains nothing, and the students'
    epochs where distillation trains them on the sweep's budget."""
    epochs = p.get("epochs")
    if not p.get("checkpoint") and epochs != 0:
        return f"{epochs} epochs"
    what = "the checkpoint" if p.get("checkpoint") else \
        "the pretrained model" if p.get("weights") else "the model"
    students = epochs and any(
        "distill" in (v.get("settings") or {}) and (v["settings"]["distill"] or {}).get(
            "epochs") is None for v in p.get("variants") or [])
    if students:
        return (f"the baseline trains nothing ({what} is evaluated as loaded) · students "
                f"{epochs} epochs")
    return f"trains nothing ({what} is evaluated as loaded)"


def compact_line(kind: str, payload: dict) -> str:
    """The first screen's form of ``settings_line``: a sweep's settings with its variants
    counted, not spelled out (the whole line goes in the hover text)."""
    line = settings_line(kind, payload)
    if kind != "sweep" or " · variants: " not in line:
        return line
    count = len((payload or {}).get("variants") or [])
    return line.split(" · variants: ")[0] + f" · {count} variant{'s' if count != 1 else ''}"


def settings_line(kind: str, payload: dict) -> str:
    """"Runs: seed_cnn on digits · device auto · 8 epochs · ..." for a job's payload."""
    p = payload or {}
    if kind == "export":
        return f"Exports variant {p.get('variant')} of run {p.get('run_id')}"
    if kind == "lm" and isinstance(p.get("sweep"), dict):
        sweep, options = p["sweep"], p.get("lm") or {}
        names = [v.get("name") for v in sweep.get("variants") or []]
        return (f"Runs: {no_paths(sweep.get('model', '?'))} on "
                f"{no_paths(sweep.get('dataset', '?'))} · modes "
                f"{_value(sweep.get('runtimes'))} · windows {_value(options.get('max_windows'))}"
                f" of {_value(options.get('window'))} tokens · variants: {', '.join(names)}")
    # A model file or an image folder by its name in the operator's folder, never its path.
    head = f"{no_paths(p.get('model', '?'))} on {no_paths(p.get('dataset', '?'))}"
    if kind == "distributed":
        parts = [head, f"device {p.get('device')}", f"workers {_value(p.get('workers'))}",
                 f"compressions {_value(p.get('compressions'))}", f"{p.get('steps')} steps",
                 f"batch {p.get('batch_size')}", f"AMP {'on' if p.get('amp') else 'off'}",
                 f"seed {p.get('seed')}"]
        return "Runs: " + " · ".join(parts)
    if kind != "sweep":
        shown = [f"{k} {no_paths(_value(v))}" for k, v in p.items() if not isinstance(v, dict)]
        return f"Runs {kind}: " + " · ".join(shown)
    parts = [head, f"device {p.get('device')}", _training(p),
             f"batch {p.get('batch_size')}", f"seed {p.get('seed')}"]
    if (p.get("seeds") or 1) > 1:
        parts.append(f"{p['seeds']} seeds")
    if p.get("input_shape"):
        parts.append(f"input {_value(p['input_shape'])}")
    parts.append(f"normalize {_value(p.get('normalize'))}")
    variants = "; ".join(_variant(v) for v in p.get("variants") or [])
    return "Runs: " + " · ".join(parts) + f" · variants: {variants}"
