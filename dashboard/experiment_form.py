"""The Experiment page's form but for the techniques (``technique_form``): the model and its
weights, the data, the device and the budget. Every widget reads its first value from the
page's URL and writes its value back (``links``), under the names ``URL_NAMES`` lists: with
the techniques' (``technique_form.url_names``), everything a link may say.

The device and the budget are declared once, as ``setting(...)`` fields of ``Budget``: their
widgets (``settings_form.single``), ranges, help and URL parameters all come from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import streamlit as st

from benchmarks.spec.sweep import DEVICES, MAX_BATCH, MAX_EPOCHS, MAX_SEEDS, NORMALIZE_MODES
from dashboard import catalog, links, settings_form, state, technique_form
from dashboard.markup import md
from optimizers.settings import EPOCHS_RANGE, setting, setting_fields

ZOO, FILE = "Model zoo", "Model file (server folder)"
LM = "Language model (text)"
DEFAULT_LM = "tiny-lm"
TEXT = "text"                          # the embedded text (Python's help topics)
SCRATCH = "none: train from scratch"
SCRATCH_URL = "none"                  # how the URL says SCRATCH
DEFAULT_MODEL = "seed_cnn"
UPLOAD_TYPES = ["safetensors", "pt", "pth"]
MAX_UPLOAD_MB = 200
NORMALIZE_CUSTOM = "MEAN,STD"
WEIGHTS_NORMALIZE = "the weights' own"
WEIGHTS_URL = "weights"               # how the URL says WEIGHTS_NORMALIZE
FACTORY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Budget:
    """The sweep-level settings the page offers, with the bounds the spec checks."""

    device: str = setting("auto", "where the sweep runs; auto: the GPU when the worker sees "
                          "one", choices=DEVICES)
    epochs: int = setting(8, "training budget of the baseline (and of the students); 0: the "
                          "baseline is the model as loaded, untrained", integer=True,
                          low=EPOCHS_RANGE[0], high=MAX_EPOCHS, step=1)
    batch_size: int = setting(32, "examples per batch, in training and in timing",
                              integer=True, low=1, high=MAX_BATCH, step=1)
    seeds: int = setting(1, "rebuild every trained variant with this many seeds: accuracy as "
                         "mean ± std, distillation's gain over its scratch twin with its "
                         "interval; timings are not repeated", integer=True, low=1,
                         high=min(5, MAX_SEEDS), step=1)
    combine: bool = setting(True, "one more variant chaining every enabled technique",
                            boolean=True)


# The widgets' keys (kept from before the URL carried them: tests and habits use them).
KEYS = {"device": "exp_device", "epochs": "exp_epochs", "batch_size": "exp_batch",
        "seeds": "exp_seeds", "combine": "exp_combine"}
TITLES = {"device": "Device", "epochs": "Training epochs", "batch_size": "Batch size",
          "seeds": "Repeats (seeds)", "combine": "Combine (chain every enabled technique)"}
BUDGET = {name: (meta, default) for name, meta, default in setting_fields(Budget)}
URL_NAMES = ("model", "weights", "checkpoint", "normalize", "dataset", "folder", "shape",
             "labels", "modes", *BUDGET)


def url_names() -> list[str]:
    """Every parameter an Experiment link may carry: the model and data, the budget, the
    techniques and where it will run (runtimes, batch sizes, threads)."""
    from benchmarks.spec.lm import LMOptions
    from benchmarks.spec.runtimes import DeploymentConfig
    return [*URL_NAMES, *technique_form.url_names(),
            *settings_form.config_url_names(DeploymentConfig),
            *settings_form.config_url_names(LMOptions)]


def budget(name: str, url) -> object:
    """The widget of one ``Budget`` field."""
    meta, default = BUDGET[name]
    options = catalog.sweep_choices()["devices"] if name == "device" else ()
    return settings_form.single(name, meta, default, KEYS[name], options, url=url, name=name,
                                title=TITLES[name])


@dataclass
class ModelChoice:
    model: str | None = None      # as the spec takes it; None: not chosen yet (a hub model
    #                               to type, a bad factory)
    url: str | None = None        # as the URL says it (a model file by its name alone)
    weights: str | None = None
    upload: object = None
    use_checkpoint: bool = False
    normalize: str | None = None
    language: bool = False        # a causal language model: it runs on text


@dataclass
class DataChoice:
    label: str = "digits"          # the menu's form (imagefolder:DIR)
    dataset: str | None = "digits"  # None: an image folder not given yet
    shape_text: str = ""
    labels: str | None = None
    folder: bool = field(default=False)
    lm_options: dict | None = None  # a language model's text: LMOptions' fields


# -- the model ---------------------------------------------------------------------------------

def _source_of(text: str) -> str:
    """Which menu a URL's model comes from; ValueError for a model no menu offers."""
    prefix, _, name = text.partition(":")
    if prefix in catalog.hub_sources():
        if name not in catalog.hub_models(prefix):
            raise ValueError(f"{prefix} has no classification model {name!r}")
        return prefix
    if text in catalog.models():
        return ZOO
    if text in catalog.language_models():
        return LM
    if name and prefix in catalog.model_files(state.models_dir()) and FACTORY.fullmatch(name):
        return FILE
    raise ValueError(f"{text!r} is not a zoo model, torchvision:NAME, timm:NAME, a language "
                     f"model ({', '.join(catalog.language_models())}) or FILE.py:FACTORY of "
                     f"the server's models folder")


def _part(text: str, source: str, which: int) -> str:
    _source_of(text)  # the same refusal for every widget the parameter feeds
    if source == ZOO:
        return text
    return text.split(":", 1)[which]


def model_picker(url) -> ModelChoice:
    """The model's source, the model, and for torchvision/timm the weights."""
    models, sources = catalog.models(), catalog.hub_sources()
    names = list(models)
    menu = [ZOO, *sources, LM, FILE]
    source = st.selectbox("Model from", menu, key="exp_source",
                          index=menu.index(url.initial("model", "exp_source", _source_of, ZOO)),
                          help="The zoo's small models, any classification model of "
                               "torchvision's or timm's registry, a causal language model "
                               "(run on text), or a model file")
    out = ModelChoice()
    if source == ZOO:
        first = url.initial("model", "exp_model", lambda t: _zoo(t, names), DEFAULT_MODEL)
        out.model = st.selectbox("Zoo model", names, key="exp_model",
                                 index=names.index(first if first in names else names[0]),
                                 format_func=lambda n: f"{n} — {models[n]['description']}")
    elif source in sources:
        _hub_model(source, url, out)
    elif source == LM:
        _language_model(url, out)
    else:
        _file_model(url, out)
    url.keep("model", out.url or out.model, DEFAULT_MODEL)
    return out


def _language_model(url, out: ModelChoice) -> None:
    listed = catalog.language_models()
    names = list(listed)
    first = url.initial("model", "exp_lm_model", lambda t: names[names.index(t)]
                        if _source_of(t) == LM else DEFAULT_LM, DEFAULT_LM)
    out.model = st.selectbox("Language model", names, key="exp_lm_model",
                             index=names.index(first if first in names else names[0]),
                             format_func=lambda n: f"{n} — {listed[n]}")
    out.language = True


def _zoo(text: str, names: list[str]) -> str:
    if text not in names:
        _source_of(text)
        raise ValueError(f"{text!r} is not a zoo model")
    return text


def _hub_model(source: str, url, out: ModelChoice) -> None:
    listed = catalog.hub_models(source)
    key = f"exp_{source}_model"

    def name_of(text: str) -> str | None:
        """The link's model, where it is one of this source's (a link to another source's
        model leaves this menu unpicked)."""
        return _part(text, source, 1) if _source_of(text) == source else None
    first = url.initial("model", key, name_of, None)
    picked = st.selectbox(f"{source} model", list(listed), key=key,
                          index=None if first is None else list(listed).index(first),
                          placeholder=f"type part of a name ({len(listed)} models)",
                          format_func=lambda n: f"{n} · {listed[n]['family']}")
    if picked is None:
        return
    out.model = f"{source}:{picked}"
    offered = [SCRATCH, *listed[picked]["weights"]]

    def weights_of(text: str) -> str:
        return SCRATCH if text == SCRATCH_URL else links.parse_choice(
            text, listed[picked]["weights"], f"{SCRATCH_URL} or weights {picked} has")
    chosen = st.selectbox(
        "Weights", offered, key=f"exp_{source}_weights",
        index=offered.index(url.initial("weights", f"exp_{source}_weights", weights_of,
                                        SCRATCH)),
        help="Pretrained weights come from this server's caches (torch hub's checkpoints "
             "folder, the Hugging Face cache); the run then resizes, crops and normalises "
             "inputs as the weights were trained.")
    out.weights = None if chosen == SCRATCH else chosen
    url.keep("weights", out.weights)


def _file_model(url, out: ModelChoice) -> None:
    folder = state.models_dir()
    files = catalog.model_files(folder)
    if not files:
        st.info(f"No model files in the server's models folder ({md(folder)}). The operator "
                f"adds them there (COMPRESSION_BENCH_MODELS_DIR).")
        return
    first = url.initial("model", "exp_model_file", lambda t: _part(t, FILE, 0), files[0])
    file = st.selectbox("Model file", files, key="exp_model_file", index=files.index(first),
                        help=f"Python files in {md(folder)}")
    factory = st.text_input("Factory function", key="exp_factory",
                            value=url.initial("model", "exp_factory",
                                              lambda t: _part(t, FILE, 1), "build"),
                            help="factory(num_classes, in_channels) -> nn.Module")
    if not FACTORY.fullmatch(factory or ""):
        st.error("The factory must be a Python function name, e.g. build.")
    else:
        out.model, out.url = f"{folder / file}:{factory}", f"{file}:{factory}"


def checkpoint_and_normalisation(url, out: ModelChoice, choices: dict) -> None:
    """"Start from my checkpoint" (behind a toggle: the uploader's browser code is the
    heaviest of the page, and most first runs train their own baseline) and the input
    normalisation, whose default follows from both."""
    if out.language:  # a language model is measured as loaded: no checkpoint, no pixels
        return
    out.use_checkpoint = st.toggle(
        "Start from my checkpoint", key="exp_use_checkpoint",
        value=url.initial("checkpoint", "exp_use_checkpoint", links.parse_bool, False))
    url.keep("checkpoint", links.show_bool(out.use_checkpoint), links.OFF)
    if out.use_checkpoint:
        out.upload = st.file_uploader(
            "Checkpoint", type=UPLOAD_TYPES, key="exp_checkpoint",
            max_upload_size=MAX_UPLOAD_MB,
            help="Weights only: .safetensors, or a .pt/.pth state dict (loaded with "
                 f"weights_only=True: a pickle carrying code is refused). At most "
                 f"{MAX_UPLOAD_MB} MB.")
    # A checkpoint has no safe default: it expects the inputs scaled as in its training.
    # Pretrained weights bring their own mean and std: the default is theirs.
    options = ([WEIGHTS_NORMALIZE] if out.weights else []) + list(choices["normalize"]) + \
        [NORMALIZE_CUSTOM]
    default = WEIGHTS_NORMALIZE if out.weights else "none" if out.use_checkpoint else "dataset"
    key = ("exp_normalize_weights" if out.weights else
           "exp_normalize_ckpt" if out.use_checkpoint else "exp_normalize")
    normalize = st.selectbox(
        "Input normalisation", options, key=key,
        index=options.index(url.initial("normalize", key, lambda t: _normalize_option(
            t, options), default)),
        help="dataset: the training split's per-channel mean and std; none: [0, 1] pixels; "
             "imagenet: ImageNet's mean and std; MEAN,STD: your own (per channel joined by "
             "':').")
    shown = {WEIGHTS_NORMALIZE: WEIGHTS_URL}.get(normalize, normalize)
    if normalize == NORMALIZE_CUSTOM:
        normalize = shown = st.text_input(
            "Mean,std", key="exp_normalize_custom",
            value=url.initial("normalize", "exp_normalize_custom", _custom, "0.5,0.25"))
    elif normalize == WEIGHTS_NORMALIZE:
        normalize = None
    url.keep("normalize", shown, {WEIGHTS_NORMALIZE: WEIGHTS_URL}.get(default, default))
    out.normalize = normalize
    if out.use_checkpoint:
        st.caption("A checkpoint sees its inputs scaled as in its own training: pick that "
                   "here. 'none' feeds [0, 1] pixels; a wrong choice scores near chance, and "
                   "the run then says so.")


def _normalize_option(text: str, options: list[str]) -> str:
    if text == WEIGHTS_URL and WEIGHTS_NORMALIZE in options:
        return WEIGHTS_NORMALIZE
    if text in NORMALIZE_MODES:
        return text
    _custom(text)
    return NORMALIZE_CUSTOM


def _custom(text: str) -> str:
    from benchmarks.spec.sweep import parse_normalize
    try:
        parse_normalize(text)
    except ValueError:
        raise ValueError(f"must be {'|'.join(NORMALIZE_MODES)}, {WEIGHTS_URL} or MEAN,STD "
                         f"(std > 0), got {text!r}") from None
    return text


# -- the data ----------------------------------------------------------------------------------

def _short(menu: str) -> str:
    return menu.split(":", 1)[0]


def _shape(text: str) -> str:
    parts = text.replace("x", ",").split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"must be three positive integers C,H,W, got {text!r}")
    return text


def text_picker(url) -> "DataChoice":
    """A language model's text: the embedded default (a file of one's own is `run --dataset
    text:PATH` on the command line), and how it is cut and the generation timed."""
    from benchmarks.spec.lm import LMOptions
    st.selectbox("Text", [TEXT], key="exp_text",
                 format_func=lambda _: "text: Python's own help topics (embedded, about "
                                       "465,000 characters of English technical prose)")
    url.keep("dataset", TEXT, "digits")
    with st.expander("Windows and the timed generation"):
        options = settings_form.config_form(LMOptions, "exp_lm_opt", url=url)
    return DataChoice(label=TEXT, dataset=TEXT, lm_options=options)


def lm_modes(url) -> tuple[str, ...]:
    """The runtime modes every language-model variant is timed in."""
    from benchmarks.spec.lm import LM_RUNTIMES
    first = url.initial("modes", "exp_lm_modes", lambda t: [
        links.parse_choice(m, list(LM_RUNTIMES), "a runtime mode") for m in t.split(",")],
        ["eager"])
    modes = st.multiselect("Runtime modes", list(LM_RUNTIMES), default=first,
                           key="exp_lm_modes",
                           help="eager PyTorch, and torch.compile (Inductor: its first round "
                                "compiles, which takes a while)")
    url.keep("modes", ",".join(modes) or None, "eager")
    return tuple(modes)


def data_picker(url) -> DataChoice:
    """The data set and what it needs (an image folder's directory, an input shape)."""
    menus = catalog.datasets()
    shorts = [_short(m) for m in menus]
    first = url.initial("dataset", "exp_dataset",
                        lambda t: menus[shorts.index(links.parse_choice(t, shorts,
                                                                        "a data set"))],
                        menus[0] if "digits" not in shorts else menus[shorts.index("digits")])
    label = st.selectbox("Data set", menus, key="exp_dataset", index=menus.index(first),
                         format_func=_short)
    url.keep("dataset", _short(label), "digits")
    out = DataChoice(label=label, dataset=label)
    if label.startswith("imagefolder"):
        out.folder = True
        folders = state.data_folders()
        directory = st.text_input(
            "Image folder (in the server's data folder; one sub-folder per class)",
            key="exp_imagefolder", value=url.initial("folder", "exp_imagefolder", str, ""),
            help="A path relative to the operator's data folder (COMPRESSION_BENCH_DATA_DIR)" +
                 (f"; it holds: {', '.join(folders)}" if folders else "; it is empty"))
        url.keep("folder", directory.strip() or None)
        out.dataset = directory.strip() or None  # checked against the data folder later
        out.shape_text = st.text_input("Resize to C,H,W (optional)", key="exp_shape_if",
                                       value=url.initial("shape", "exp_shape_if", _shape, ""))
        url.keep("shape", out.shape_text.strip() or None)
        imagenet = st.checkbox(
            "Class folders are ImageNet ids (n01440764 …)", key="exp_labels",
            value=url.initial("labels", "exp_labels", lambda t: links.parse_choice(
                t, ["imagenet"], "imagenet") == "imagenet", False),
            help="Scored by the model's own 1000-class head (pretrained weights, no head "
                 "change); unticked, the folders are the classes and a new head is trained.")
        out.labels = "imagenet" if imagenet else None
        url.keep("labels", out.labels)
    elif label == "synthetic":
        out.shape_text = st.text_input(
            "Input shape C,H,W", key="exp_shape",
            value=url.initial("shape", "exp_shape", _shape, "3,32,32"),
            help="Synthetic data measures speed only: accuracy is empty.")
        url.keep("shape", out.shape_text, "3,32,32")
    return out


# -- the sweep the form describes --------------------------------------------------------------

def _input_shape(text: str):
    if not text.strip():
        return None
    try:
        return tuple(int(p) for p in text.replace("x", ",").split(","))
    except ValueError:
        raise ValueError(f"input shape must be three integers C,H,W, got {text!r}") from None


@dataclass
class Experiment:
    """What the form holds: the sweep it plans, or the one line saying why not."""

    model: ModelChoice
    data: DataChoice
    budget: dict                 # Budget's fields by name
    enabled: set
    choices: dict                # {(technique, field): value or values}
    deployment: dict = field(default_factory=dict)  # DeploymentConfig's fields by name
    modes: tuple = ("eager",)    # a language model's runtime modes

    @property
    def kind(self) -> str:
        """The job kind the form submits: a language model's run, or a sweep."""
        return "lm" if self.model.language else "sweep"

    def lm_request(self):
        """A language model's job (``LMRequest``): its variants from the language-model
        techniques' controls, one technique each (a variant takes one of int8 and int4)."""
        from benchmarks.spec.lm import LMOptions, LMRequest
        from benchmarks.spec.sweep import SweepSpec
        from optimizers import registry
        if not self.modes:
            raise ValueError("choose at least one runtime mode (eager, compile)")
        spec = SweepSpec.from_choices(self.choices, self.enabled, combine=False,
                                      model=self.model.model, dataset=TEXT, device="cpu",
                                      runtimes=self.modes)
        for variant in spec.variants:
            for name, settings in variant.settings:
                registry.get(name).check_family(settings, "lm")
        return LMRequest(spec, LMOptions(**(self.data.lm_options or {})))

    def fields(self, checkpoint: str | None = None) -> dict:
        if self.model.model is None:
            raise ValueError("choose a model (a file and its factory function, or a "
                             "torchvision/timm name)")
        if self.data.dataset is None:
            raise ValueError("give the image folder's directory")
        b = self.budget
        dataset = state.image_folder(self.data.dataset) if self.data.folder else \
            self.data.dataset
        return dict(model=self.model.model, dataset=dataset, checkpoint=checkpoint,
                    input_shape=_input_shape(self.data.shape_text), device=b["device"],
                    batch_size=int(b["batch_size"]), epochs=int(b["epochs"]),
                    seeds=int(b["seeds"]), normalize=self.model.normalize,
                    weights=self.model.weights, labels=self.data.labels,
                    **self.deployment_axes().sweep_fields())

    def deployment_axes(self):
        """The runtimes, batch sizes and threads; refused here as this server's worker
        would refuse them: a runtime not installed, more threads than its cores."""
        from benchmarks.spec.runtimes import DeploymentConfig, check_available, check_threads
        deployment = DeploymentConfig(**self.deployment)
        check_available(deployment.runtimes)
        check_threads(deployment.threads or ())
        return deployment

    def spec(self, checkpoint: str | None = None):
        from benchmarks.spec.sweep import SweepSpec
        return SweepSpec.from_choices(self.choices, self.enabled,
                                      combine=self.budget["combine"],
                                      **self.fields(checkpoint))

    def plan(self):
        """(spec, None), or (None, the reason it is refused) before any checkpoint; for a
        language model, (its LMRequest, None)."""
        from benchmarks.zoo.models import preflight
        try:
            if self.model.language:
                return self.lm_request(), None
            spec = self.spec()
            preflight(spec.model, spec.weights)  # an unknown name, weights not in the caches
            return spec, None
        except ValueError as exc:
            return None, str(exc)


def describe_lm(request) -> str:
    """What a language model's run will do, in one line, before the click."""
    spec, options = request.sweep, request.options
    variants, modes = len(spec.variants), len(spec.runtimes)
    return (f"{variants} variant{'s' if variants != 1 else ''} x {modes} mode"
            f"{'s' if modes != 1 else ''} = {variants * modes} cells of {spec.model} on the "
            f"embedded text: {options.max_windows or 'all'} windows of {options.window} "
            f"tokens, each variant scored paired with the baseline, then every cell timed "
            f"together ({spec.timing_rounds} rounds of {options.new_tokens} new tokens)"
            + (" (compiling takes a while)" if "compile" in spec.runtimes else ""))
