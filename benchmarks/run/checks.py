"""What a sweep checks about its inputs before it runs, and about its baseline once loaded.

Before anything allocates: each technique's own refusals (a student that exists), data paths inside the operator's folder, how
inputs are normalised (and a loud guess where that is unknown), and the sweep's estimated peak
memory against what it may use. Once the baseline is scored: a checkpoint or pretrained model
that scores near chance, or far below what another normalisation scores on the same examples,
almost always means inputs scaled otherwise than in its training, and the run says which
normalisation scores best.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.report.stats import discordant, mcnemar_exact, unpack_bits
from benchmarks.spec.folders import inside
from benchmarks.spec.sweep import NORMALIZE_MODES, SweepSpec, parse_normalize
from benchmarks.zoo.models import check_model, default_student
from optimizers import registry
from optimizers.registry import Preflight

if TYPE_CHECKING:
    from benchmarks.report.results import VariantResult

__all__ = ["check_data_paths", "check_job_paths", "check_near_chance", "model_card",
           "normalization", "preflight", "technique_preflight"]

ACCURACY_BATCH = 256  # accuracy does not depend on the batch size; larger is faster
# A baseline loaded from a checkpoint within this many points of chance is suspect; so is one
# that another normalisation would score this many points better (and significantly).
NEAR_CHANCE_POINTS = 5.0
BETTER_NORMALIZE_POINTS = 10.0


def preflight(spec: SweepSpec, family: str = "image") -> None:
    """Each technique's own refusals (``Technique.preflight``: distillation's student must
    exist) and those of its model's ``family`` (INT4 is a language model's), once per distinct
    settings, before anything runs."""
    seen = set()
    for v in spec.variants:
        chain = tuple(name for name, _ in v.settings)
        for name, settings in v.settings:
            if (name, settings, chain) not in seen:
                seen.add((name, settings, chain))
                technique_preflight(spec, name, settings, chain, family)


def technique_preflight(spec: SweepSpec, name: str, settings, chain: tuple = (),
                        family: str = "image") -> None:
    """One technique's refusal of these settings, in this chain, on this sweep's model
    (ValueError)."""
    technique = registry.get(name)
    technique.check_family(settings, family)
    if technique.preflight is not None:
        technique.preflight(settings, Preflight(model=spec.model, epochs=spec.epochs,
                                                check_model=check_model,
                                                default_student=default_student,
                                                chain=chain))


def check_data_paths(spec: SweepSpec, folder: Path) -> None:
    """Jobs from the dashboard read data only inside the operator's data folder."""
    check_job_paths(spec.model, spec.dataset, spec.data_root, data=folder)


MODELS_WHERE = "the server's models folder (COMPRESSION_BENCH_MODELS_DIR)"


def check_job_paths(model: str | None, dataset: str | None, data_root: str | None, *,
                    models: Path | None = None, data: Path | None = None) -> None:
    """What every job kind checks in the worker before it reads anything (sweep, recommend,
    sensitivity, lm, distributed alike): a job from the dashboard reads files only inside
    the operator's folders. A model file (``FILE.py:FACTORY``) or a Hugging Face folder
    (``hf:DIR``) inside ``models``; an image folder (``imagefolder:DIR``), a text file or
    folder (``text:PATH``) and a data root inside ``data``. One line naming the rule
    otherwise (whether the path exists is not said); None skips a folder's checks."""
    from benchmarks.zoo.hf_folder import HF_PREFIX
    from benchmarks.zoo.models import is_user_model
    if models is not None and isinstance(model, str):
        if model.startswith(HF_PREFIX):
            inside(models, _as_read(model[len(HF_PREFIX):]), f"model {model}",
                   where=MODELS_WHERE)
        elif is_user_model(model):
            file = model.rsplit(":", 1)[0]
            inside(models, _as_read(file), f"model file {file}", kind="a file",
                   where=MODELS_WHERE)
    if data is None:
        return
    kind, colon, argument = (dataset or "").partition(":")
    if colon and kind == "imagefolder":
        inside(data, _as_read(argument))
    elif colon and kind == "text":
        inside(data, _as_read(argument), f"the text {argument}", kind="a file or folder")
    if data_root:
        inside(data, _as_read(data_root), "the data root")


def _as_read(typed: str) -> str:
    """A path as the loaders open it: a relative one from the process's folder (checked
    relative to the allowed folder instead, ``x`` would pass as ``data/x`` and then be read
    as ``./x``). Empty stays empty (refused)."""
    text = (typed or "").strip()
    return str(Path(text).expanduser().absolute()) if text and "\x00" not in text else text


def normalization(spec: SweepSpec, pipeline, warnings: list[str]) -> str:
    """--normalize as given; else the weights' own mean and std; else the data set's (a
    guess, said in ``warnings``, when a checkpoint was trained who knows how)."""
    if spec.normalize is not None:
        parse_normalize(spec.normalize)
        if pipeline is not None and spec.normalize != pipeline.normalize():
            warnings.append(f"--normalize {spec.normalize} overrides how the weights were "
                            f"trained (mean {list(pipeline.mean)}, std {list(pipeline.std)})")
        return spec.normalize
    if pipeline is not None:
        return pipeline.normalize()
    if spec.checkpoint:
        warnings.append(
            "no --normalize given with --checkpoint: inputs are standardised with the data "
            "set's own statistics, which may not be how the checkpoint was trained; say how "
            "with --normalize dataset|none|imagenet|MEAN,STD")
    return "dataset"


def model_card(spec: SweepSpec, source, data, keep_head: bool, warnings: list[str]) -> dict:
    """What the baseline starts from, for the run's record and the baseline's config."""
    card = {"source": source.name, "name": spec.model, "family": source.family(spec.model),
            **source.card(spec.model, spec.weights, data.num_classes, keep_head)}
    starts = "the weights" if spec.weights else "the checkpoint" if spec.checkpoint \
        else "random initialisation"
    if spec.epochs == 0 and data.labelled:
        card["baseline"] = f"evaluated as loaded from {starts}, no training (--epochs 0)"
        if spec.weights and not keep_head:
            warnings.append(
                "--epochs 0 with a replaced classifier: the new head is untrained and scores "
                "near chance; name ImageNet-id folders with --labels imagenet, or train it "
                "with --epochs N")
        elif not spec.weights and not spec.checkpoint:
            warnings.append("--epochs 0 without --weights or --checkpoint: the baseline is "
                            "the randomly initialised model")
    elif data.labelled and not spec.checkpoint:
        card["baseline"] = f"trained {spec.epochs} epochs from {starts}"
    return card


def _check_trained(spec, data, result: VariantResult) -> None:
    """A baseline trained here that scores near chance learned nothing: every comparison
    (and a recommendation's certificate) is then against an untrained model."""
    chance = 100.0 / data.num_classes
    if spec.epochs > 0 and 100 * result.scores.accuracy <= chance + NEAR_CHANCE_POINTS:
        result.warnings.append(
            f"the baseline trained here ({spec.epochs} epochs) scores "
            f"{100 * result.scores.accuracy:.1f}%, near chance ({chance:.1f}%): it has not learned "
            f"this data, so every variant is compared against an untrained model; give more "
            f"--epochs, a model suited to input shape {'x'.join(map(str, data.input_shape))}, "
            f"or a --checkpoint")


def check_near_chance(sweep, result: VariantResult, model, device) -> None:
    """Warn, on ``result``, when a loaded baseline's score says its inputs are scaled wrong,
    or when one trained here learned nothing."""
    from benchmarks.zoo.datasets import renormalized
    from optimizers.training import correctness
    spec, data = sweep.spec, sweep.data
    pretrained = spec.weights is not None and sweep.keep_head
    if result.scores.accuracy is None:
        return
    if not (spec.checkpoint or pretrained):
        _check_trained(spec, data, result)
        return
    name = Path(spec.checkpoint).name if spec.checkpoint else f"{spec.model} {spec.weights}"
    mode = (data.normalization or {}).get("mode")
    mine = unpack_bits(result.scores.correct_bits, result.scores.n_test)
    best = None
    for other in NORMALIZE_MODES:
        if other == mode:
            continue
        x = renormalized(data, "test", other)
        right = correctness(model, ((x[i:i + ACCURACY_BATCH], data.test.y[
            i:i + ACCURACY_BATCH]) for i in range(0, len(x), ACCURACY_BATCH)), device)
        gain = 100 * (sum(right) - sum(mine)) / len(right)
        if gain >= BETTER_NORMALIZE_POINTS and mcnemar_exact(
                *discordant(right, mine)) < 0.05 and (best is None or gain > best[1]):
            best = (other, gain, sum(right) / len(right))
    chance = 100.0 / data.num_classes
    if best is not None:
        result.warnings.append(
            f"the baseline loaded from {name} scores {100 * result.scores.accuracy:.1f}% with "
            f"normalize {mode} but {100 * best[2]:.1f}% with {best[0]} on the same test "
            f"images: its training probably scaled inputs that way; give --normalize "
            f"{best[0]} (accepted: dataset|none|imagenet|MEAN,STD)")
    elif 100 * result.scores.accuracy <= chance + NEAR_CHANCE_POINTS:
        result.warnings.append(
            f"the baseline loaded from {name} scores {100 * result.scores.accuracy:.1f}%, near "
            f"chance ({chance:.1f}%): its inputs are probably scaled differently from its "
            f"training (normalize is {mode}); give --normalize dataset|none|imagenet|"
            f"MEAN,STD as it was trained")
