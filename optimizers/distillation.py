"""Knowledge distillation (Hinton et al., 2015) and its control.

``apply`` trains a smaller student from scratch on the teacher's softened outputs plus the
labels; ``train_scratch`` trains the same student, same budget and seed, on labels alone, so
the teacher's effect is measured rather than assumed. ``recover`` is the chained form: it
fine-tunes an existing (pruned) model against its unpruned teacher (Minitron-style
prune-then-distill) instead of training a separate student.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from optimizers.base import Context, Outcome
from optimizers.settings import DistillSettings
from optimizers.training import FINETUNE_LR_SCALE, fit


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
            temperature: float, alpha: float) -> torch.Tensor:
    """alpha * T^2 * KL(softmax(t/T) || softmax(s/T)) + (1 - alpha) * CE(s, y).

    T^2 keeps the soft term's gradients on the same scale as the hard term's as T changes.
    ``log_softmax`` (not log of softmax) is the numerically stable input ``kl_div`` expects;
    "batchmean" is the true KL divergence per sample ("mean" would divide by classes too).
    """
    t = temperature
    soft = F.kl_div(F.log_softmax(student_logits.float() / t, dim=1),
                    F.softmax(teacher_logits.float() / t, dim=1), reduction="batchmean")
    hard = F.cross_entropy(student_logits.float(), labels)
    return alpha * t * t * soft + (1.0 - alpha) * hard


def _frozen_teacher(teacher: nn.Module, device: torch.device) -> nn.Module:
    # A private copy: eval() and requires_grad_ would otherwise change a shared, cached model.
    frozen = copy.deepcopy(teacher).to(device).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen


def teacher_logits(teacher: nn.Module, ctx: Context) -> torch.Tensor:
    """The teacher's logits on every training example (CPU, float32), computed once per
    sweep and shared by every distillation variant (``Context.memo``)."""
    def compute() -> torch.Tensor:
        frozen = _frozen_teacher(teacher, ctx.device)
        out = torch.empty(len(ctx.data.train), ctx.data.num_classes)
        with torch.inference_mode():
            for x, _, idx in ctx.data.train.ordered():
                out[idx] = frozen(x.to(ctx.device)).float().cpu()
        return out
    # The teacher object is the sweep's baseline (or a chain's unpruned input): its identity
    # names its weights, and the memo holds it beside its logits, so no other model can take
    # its id while the memo lives (a sweep's may outlive one run: a recommendation's waves).
    return ctx.memo(("teacher_logits", id(teacher)), lambda: (teacher, compute()))[1]


def _kd_loss_fn(logits: torch.Tensor, settings: DistillSettings):
    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
             idx: torch.Tensor) -> torch.Tensor:
        target = logits[idx.cpu()].to(x.device, non_blocking=True)
        return kd_loss(model(x), target, y, settings.temperature, settings.alpha)
    return loss


def student_name(settings: DistillSettings, ctx: Context) -> str:
    name = settings.student or ctx.teaching.default_student
    if not name:
        raise ValueError("distill.student must name a student model: this model family has no "
                         "default student; pass one of the registry's models (see `list`)")
    if ctx.teaching.build_model is None:
        raise ValueError("distillation needs Context.teaching.build_model to build the student")
    return name


def _build_student(name: str, ctx: Context):
    def build() -> nn.Module:
        # Seeded here so the KD student and its scratch control start from the same weights.
        torch.manual_seed(ctx.budget.seed)
        return ctx.teaching.build_model(name)
    return build


def _epochs(settings: DistillSettings, ctx: Context) -> int:
    return settings.epochs or ctx.budget.epochs


def _config(settings: DistillSettings, name: str, epochs: int) -> dict:
    return {"student": name, "temperature": settings.temperature, "alpha": settings.alpha,
            "epochs": epochs}


def apply(model: nn.Module, settings: DistillSettings, ctx: Context) -> Outcome:
    """Train ``settings.student`` (or the default student) against ``model`` as teacher.

    In a chain after pruning, ``model`` is the pruned model: it is recovered from its
    unpruned teacher (``ctx.teaching.teacher``) instead of a separate student being trained."""
    pruned = ctx.after("prune")
    if pruned is not None:
        return _recover_pruned(model, settings, ctx, pruned.settings)
    name = student_name(settings, ctx)
    epochs = _epochs(settings, ctx)
    build = _build_student(name, ctx)
    build()  # fail early (unknown name -> ValueError) before the teacher is copied

    def train(student: nn.Module, data) -> None:
        fit(student, data, epochs, device=ctx.device, lr=ctx.budget.lr, seed=ctx.budget.seed,
            loss_fn=_kd_loss_fn(teacher_logits(model, ctx), settings), amp=ctx.budget.amp,
            on_progress=lambda f: ctx.progress("distill", f))

    key = ("distill", name, settings.temperature, settings.alpha, epochs, ctx.budget.lr,
           ctx.budget.seed)
    student = copy.deepcopy(ctx.train_cached(key, build, train)).eval()
    return Outcome(model=student, config={"distill": _config(settings, name, epochs)})


def _recover_pruned(model: nn.Module, settings: DistillSettings, ctx: Context,
                    prune_settings) -> Outcome:
    from optimizers import pruning  # local: pruning does not need distillation
    teacher = ctx.teaching.teacher if ctx.teaching.teacher is not None else model
    epochs = settings.epochs or max(prune_settings.finetune_epochs, 1)
    out = recover(model, teacher, settings, ctx, epochs,
                  keep_zeros=prune_settings.method != "channel")
    report = pruning.sparsity_report(out.model)
    out.layer_sparsity = report["layers"]
    out.config["distill"]["effective_sparsity_after"] = round(report["effective_sparsity"], 6)
    return out


def train_scratch(settings: DistillSettings, ctx: Context) -> Outcome:
    """The control: the same student, budget and seed, trained on labels only."""
    name = student_name(settings, ctx)
    epochs = _epochs(settings, ctx)

    def train(student: nn.Module, data) -> None:
        fit(student, data, epochs, device=ctx.device, lr=ctx.budget.lr, seed=ctx.budget.seed,
            amp=ctx.budget.amp, on_progress=lambda f: ctx.progress("student-scratch", f))

    key = ("student-scratch", name, epochs, ctx.budget.lr, ctx.budget.seed)
    student = copy.deepcopy(ctx.train_cached(key, _build_student(name, ctx), train)).eval()
    return Outcome(model=student,
                   config={"student-scratch": {"student": name, "epochs": epochs}})


def recover(model: nn.Module, teacher: nn.Module, settings: DistillSettings, ctx: Context,
            epochs: int, *, keep_zeros: bool = False, key_parts: tuple = ()) -> Outcome:
    """KD fine-tune of a copy of ``model`` against ``teacher`` for ``epochs`` epochs.

    ``keep_zeros`` holds the current zero weights at zero (unstructured pruning), so the
    sparsity survives. ``key_parts`` names how ``model`` was made (e.g. the prune settings):
    it joins the cache key, since the result depends on it.
    """
    from optimizers import pruning  # local: pruning does not need distillation

    def build() -> nn.Module:
        return copy.deepcopy(model)

    def train(m: nn.Module, data) -> None:
        tune = pruning.fit_sparse if keep_zeros else fit
        tune(m, data, epochs, device=ctx.device, lr=ctx.budget.lr * FINETUNE_LR_SCALE,
             seed=ctx.budget.seed,
             loss_fn=_kd_loss_fn(teacher_logits(teacher, ctx), settings), amp=ctx.budget.amp,
             on_progress=lambda f: ctx.progress("distill (recover)", f))

    key = tuple(key_parts) + ("distill-recover", settings.temperature, settings.alpha, epochs,
                              ctx.budget.lr * FINETUNE_LR_SCALE, ctx.budget.seed)
    recovered = copy.deepcopy(ctx.train_cached(key, build, train)).eval()
    config = {"mode": "recover", "teacher": "unpruned model", "temperature": settings.temperature,
              "alpha": settings.alpha, "epochs": epochs}
    return Outcome(model=recovered, config={"distill": config})


scratch = train_scratch  # the registry's control of distillation, by its short name
