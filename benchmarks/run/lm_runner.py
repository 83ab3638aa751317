"""A language model's sweep: the image sweep's method on a causal LM.

Every variant of the spec is built from the baseline by the registry's language-model
techniques (``Technique.lm_apply``: pruning by magnitude or Wanda, INT8 weight-only or W8A8,
INT4 in groups, bf16 autocast), each reading only the calibration windows. Its quality is
measured paired with the baseline on the same evaluation windows (perplexity, the change in
NLL per token with a bootstrap interval over windows, next-token accuracy, agreement, KL:
``benchmarks.measure.lm_quality``), and its per-window outcomes are kept, so every figure
and a certificate recompute from the record. Then every variant is timed under each runtime
mode (eager, ``torch.compile``) in interleaved rounds, all cells together, as the image
models are: prefill of a fixed prompt, decode per token at batch 1, tokens per second, the
peak memory of a generation (``benchmarks.measure.lm_speed``), and each cell's speed-up over
the baseline in the same mode with an interval that resamples the rounds. The weights' size
is what they hold as stored (torchao's integer data and scales, a tied embedding once).

A variant whose build or measurement fails is recorded with its one-line cause; the others
go on. The baseline is the model as loaded: nothing is trained.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from benchmarks.measure.cores import current_claim
from benchmarks.measure.environment import default_threads, environment_card
from benchmarks.measure.latency import pinned_threads
from benchmarks.measure.lm_quality import PairedOutcomes, WindowOutcomes, evaluate, evaluate_pair
from benchmarks.measure.lm_speed import fixed_prompt, measure_lm_speeds
from benchmarks.measure.memory import state_bytes
from benchmarks.report.stats import bootstrap_ratio
from benchmarks.run.checks import preflight
from benchmarks.spec.cancel import StopCheck, check_stop
from benchmarks.spec.lm import LM_RUNTIMES, LMOptions
from benchmarks.spec.sweep import SweepSpec
from benchmarks.zoo.hf_folder import HF_PREFIX, folder_parameters
from benchmarks.zoo.lm import build_lm, is_language_model, lm_entry
from benchmarks.zoo.text import WindowSpec, is_text_dataset, load_text_windows
from optimizers import registry

ProgressFn = Callable[[str], None]


@dataclass
class LMVariant:
    """One variant's record: how it was built, its paired quality, its size, and a timing
    cell per runtime mode."""
    name: str
    techniques: tuple[str, ...]
    settings: dict
    axes: dict = field(default_factory=dict)   # where it sits on each swept setting
    config: dict = field(default_factory=dict)
    ok: bool = True
    error: str | None = None
    build_s: float | None = None
    quality: dict | None = None      # PairedOutcomes.summary(): the baseline's for itself
    outcomes: dict | None = None     # PairedOutcomes.to_dict(): per evaluation window
    size: dict | None = None
    cells: list[dict] = field(default_factory=list)
    model: nn.Module | None = field(default=None, repr=False)

    def fail(self, stage: str, exc: BaseException) -> None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        self.ok, self.error, self.model = False, f"{stage}: {first}", None

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": "lm", "techniques": list(self.techniques),
                "settings": self.settings, "axes": self.axes, "config": self.config,
                "ok": self.ok,
                "error": self.error, "build_s": self.build_s, "quality": self.quality,
                "outcomes": self.outcomes, "size": self.size, "cells": self.cells}


def check_lm_spec(spec: SweepSpec) -> None:
    """A language model's sweep, refused in one line before anything loads."""
    if not is_language_model(spec.model):
        raise ValueError(f"the text data set {spec.dataset} takes a language model (see "
                         f"`list`); {spec.model} is an image model")
    lm_entry(spec.model)  # an unknown name or a folder that is not one, in one line
    if not is_text_dataset(spec.dataset):
        raise ValueError(f"{spec.model} is a language model: it runs on a text data set "
                         f"(text, or text:PATH); got {spec.dataset}")
    unknown = [r for r in spec.runtimes if r not in LM_RUNTIMES]
    if unknown:
        raise ValueError(f"a language model runs under {', '.join(LM_RUNTIMES)}; not "
                         f"{', '.join(unknown)}")
    if spec.device == "cuda":
        raise ValueError("language models run on the CPU in this version; give --device cpu "
                         "or auto")
    if spec.eval_batch_sizes or spec.thread_counts or spec.isa or spec.seeds > 1:
        raise ValueError("a language model's run takes no --eval-batch-size, --isa, several "
                         "--threads or --seeds: its cells are decode at batch 1 on one "
                         "thread count")
    preflight(spec, family="lm")
    for v in spec.variants:
        if {"int8", "int4"} <= set(v.techniques):
            raise ValueError(f"variant {v.name} applies int8 and int4: a variant takes one "
                             f"(drop --combine, or one of the two)")


def check_lm_sizes(model: str, options: LMOptions, context: int,
                   memory_share: float | None = None) -> None:
    """What a language model's run will take, bounded before anything loads: the window and
    the timed generation (prompt plus new tokens) within the model's context, and a local
    folder's model (``hf:DIR``, its parameters from its config) within the memory a job may
    use (``footprint.admit``). One line each."""
    if options.window > context:
        raise ValueError(f"--window {options.window} is longer than {model}'s context "
                         f"({context} tokens)")
    generated = options.prompt_tokens + options.new_tokens
    if generated > context:
        raise ValueError(f"--prompt-tokens {options.prompt_tokens} and --new-tokens "
                         f"{options.new_tokens} make {generated} tokens, more than {model}'s "
                         f"context ({context} tokens): give at most "
                         f"{context - options.prompt_tokens} new tokens")
    if model.startswith(HF_PREFIX):
        from benchmarks.run.footprint import admit, lm_footprint
        from benchmarks.spec.limits import Limits
        parameters = folder_parameters(model)
        share = memory_share if memory_share is not None else Limits.from_env().memory_share
        admit(f"{model} ({parameters / 1e6:,.0f}M parameters from its config.json, fp32)",
              lm_footprint(parameters), share,
              smaller="give a smaller model (a job loads it in fp32)")


class LMSweep:
    """A validated language model's sweep, its model and text loaded."""

    def __init__(self, spec: SweepSpec, options: LMOptions, memory_share: float | None = None):
        check_lm_spec(spec)
        self.spec, self.options = spec, options
        self.entry = lm_entry(spec.model)
        check_lm_sizes(spec.model, options, self.entry.context, memory_share)
        # The image sweeps' rule, all cores but one: on both cores of two no quantized cell
        # decoded faster than fp32; on one, INT8 decoded at 0.88-1.28x its speed.
        self.threads = spec.threads or default_threads()
        torch.set_num_threads(self.threads)
        torch.manual_seed(spec.seed)
        self.lm = build_lm(spec.model)
        self.windows = load_text_windows(
            spec.dataset, self.lm.tokenizer, self.lm.context, spec.model,
            WindowSpec(options.window, options.stride), seed=spec.seed,
            max_windows=options.max_windows)
        self.device = torch.device("cpu")
        self.environment = {**environment_card(self.device, self.threads),
                            "model": self.lm.card, "text": self.windows.card(),
                            "options": options.to_dict()}

    def calibration(self) -> torch.Tensor:
        return self.windows.part("calibration")[0]

    def evaluation(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = list(self.windows.evaluation())
        return self.windows.ids[idx], self.windows.scored[idx]

    def build(self, spec_variant) -> LMVariant:
        """One variant built from a copy of the baseline, technique by technique in chain
        order; its failure recorded, not raised."""
        variant = LMVariant(spec_variant.name, spec_variant.techniques,
                            {name: _plain(settings) for name, settings in spec_variant.settings},
                            dict(spec_variant.axes))
        start = time.perf_counter()
        model = self.lm.model
        try:
            for name, settings in spec_variant.settings:
                model, config = registry.get(name).lm_apply_fn()(model, settings,
                                                                 self.calibration())
                variant.config.update(config)
        except Exception as exc:  # a technique's own failure: this variant's, one line
            variant.fail("build", exc)
            return variant
        variant.build_s = time.perf_counter() - start
        variant.model = model  # the baseline: the loaded model itself, never changed
        return variant

    def score(self, variant: LMVariant, should_stop: StopCheck | None = None) -> None:
        ids, scored = self.evaluation()
        try:
            # The baseline against itself is known without a second pass over the windows
            # (a pass of smollm2-135m is minutes here): the same outcomes, every prediction
            # agreeing, no divergence. Cancel is asked between batches of windows.
            paired = evaluate_pair(self.lm.model, variant.model, ids, scored,
                                   should_stop=should_stop) if variant.techniques else \
                _itself(evaluate(self.lm.model, ids, scored, should_stop=should_stop))
        except Exception as exc:
            variant.fail("quality", exc)
            return
        variant.quality, variant.outcomes = paired.summary(), paired.to_dict()
        variant.size = _size(variant.model)

    def run(self, on_progress: ProgressFn | None = None,
            on_record: Callable[[int, LMVariant], object] | None = None,
            should_stop: StopCheck | None = None) -> list[LMVariant]:
        """Build and score every variant, then time them all together; ``on_record`` gets
        each variant's record as it is scored, and again once timed (a store keeps what a
        stopped run measured); ``should_stop`` is asked between variants and before the
        timing, and within them between batches of windows and between generations
        (``Cancelled``: Cancel lands within seconds, not after a pass of minutes)."""
        say = on_progress or (lambda _line: None)
        record = on_record or (lambda _position, _variant: None)
        variants = []
        with pinned_threads(self.threads):  # as an image sweep: building and scoring too
            for position, v in enumerate(self.spec.variants):
                check_stop(should_stop)
                say(f"building {v.name}")
                variant = self.build(v)
                if variant.ok:
                    say(f"scoring {v.name}")
                    self.score(variant, should_stop)
                variants.append(variant)
                record(position, variant)
            check_stop(should_stop)
            say(f"timing {sum(v.ok for v in variants) * len(self.spec.runtimes)} cells "
                f"together, {self.spec.timing_rounds} rounds")
            self.time(variants, should_stop)
        for position, variant in enumerate(variants):
            variant.model = None
            record(position, variant)
        return variants

    def time(self, variants: list[LMVariant], should_stop: StopCheck | None = None) -> None:
        """Every working variant under each mode, in interleaved rounds; speed-ups against
        the baseline in the same mode."""
        prompt = fixed_prompt(self.windows.ids, self.options.prompt_tokens)
        models, modes, owner = {}, {}, {}
        for variant in variants:
            if not variant.ok:
                continue
            for mode in self.spec.runtimes:
                cell = f"{variant.name}@{mode}"
                try:
                    models[cell] = _in_mode(variant.model, mode)
                except Exception as exc:
                    variant.cells.append({"mode": mode, "ok": False,
                                          "error": f"{mode}: {_first_line(exc)}"})
                    continue
                modes[cell], owner[cell] = mode, variant
        # Compiled models share transformers' code objects, and Dynamo's recompile limit
        # (8 graphs per code object) is counted over all of them: past it, a cell would
        # silently run eagerly. Each compiled cell gets its own 8 (decode's cache shapes).
        compiled = sum(1 for mode in modes.values() if mode == "compile")
        limits = {"recompile_limit": max(8, 8 * compiled),
                  "accumulated_recompile_limit": max(256, 64 * compiled)}
        with torch._dynamo.config.patch(**limits):
            speeds, record = _timed(models, prompt, self.device, self.options.new_tokens,
                                    self.spec.timing_rounds, modes, variants, owner,
                                    should_stop)
        claim = current_claim()
        if claim:
            record = {**record, "pinning": claim}
        baseline = variants[0].name
        for cell, speed in speeds.items():
            variant, mode = owner[cell], modes[cell]
            reference = speeds.get(f"{baseline}@{mode}")
            entry = {"mode": mode, "ok": True, **speed.summary(), "threads": self.threads,
                     "timing": record,
                     "samples": {"prefill_ms": speed.prefill_ms, "decode_ms": speed.decode_ms}}
            if reference is not None:
                entry["decode_speedup"] = bootstrap_ratio(
                    [[x] for x in reference.decode_ms], [[x] for x in speed.decode_ms])
                entry["prefill_speedup"] = bootstrap_ratio(
                    [[x] for x in reference.prefill_ms], [[x] for x in speed.prefill_ms])
            variant.cells.append(entry)


def _timed(models, prompt, device, new_tokens, rounds, modes, variants, owner,
           should_stop=None):
    """measure_lm_speeds, and where a cell fails (a kernel that compiles but does not run),
    that cell recorded as failed and the rest timed again without it."""
    while models:
        try:
            return measure_lm_speeds(models, prompt, device, new_tokens=new_tokens,
                                     rounds=rounds, modes=modes, should_stop=should_stop)
        except Exception as exc:
            failed = _failing_cell(models, prompt)
            if failed is None:
                raise
            owner[failed].cells.append({"mode": modes[failed], "ok": False,
                                        "error": f"{modes[failed]}: {_first_line(exc)}"})
            models = {k: v for k, v in models.items() if k != failed}
    return {}, {}


def _failing_cell(models: dict, prompt: torch.Tensor) -> str | None:
    from benchmarks.measure.lm_speed import time_round
    for cell, model in models.items():
        try:
            time_round(model, prompt, 1)
        except Exception:
            return cell
    return None


def _itself(outcomes: WindowOutcomes) -> PairedOutcomes:
    """A model paired with itself: what evaluate_pair gives for the same model twice."""
    import numpy as np
    twin = WindowOutcomes(outcomes.nll.copy(), outcomes.tokens.copy(), outcomes.correct.copy())
    return PairedOutcomes(outcomes, twin, outcomes.tokens.copy(),
                          np.zeros(len(outcomes.tokens)), 0.0)


def _in_mode(model: nn.Module, mode: str):
    if mode == "compile":
        return torch.compile(model)
    return model


def _size(model: nn.Module) -> dict:
    """The weights as stored, and how many of the decoder's linear weights are zero."""
    from optimizers.lm import decoder_linears
    weights = [m.weight for m in decoder_linears(model).values()]
    plain = [w for w in weights if type(w) is nn.Parameter]
    total = sum(w.numel() for w in plain)
    zeros = sum(int((w == 0).sum()) for w in plain)
    return {"weights_bytes": state_bytes(model),
            "linear_sparsity": round(zeros / total, 6) if total else None,
            "method": "stored bytes: torchao's integer data, scales and zero points; a tied "
                      "embedding once; zeros of a pruned layer still stored dense"}


def _plain(settings) -> dict:
    from dataclasses import asdict
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
