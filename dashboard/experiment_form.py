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

ZOO, FILE = "Model zoo", "Model file"
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


def combine_toggle(url, enabled: set) -> bool:
    """Combine, where there is something to chain: on by default with two or more techniques
    on; with fewer, off and disabled, and a caption says why (never a refusal at the click)."""
    can = len(enabled) >= 2
    technique_form.follow_default(KEYS["combine"], can)
    meta, _ = BUDGET["combine"]
    on = settings_form.single("combine", meta, can, KEYS["combine"], url=url, name="combine",
                              title=TITLES["combine"], disabled=not can)
    if not can:
        st.caption("Combine chains two or more techniques: turn on another to add the "
                   "chained variant.")
    return bool(on and can)


def technique_defaults(model: str | None) -> tuple[dict, dict]:
    """The technique switches' defaults and what their empty settings mean for ``model``
    (``technique_form.all_controls``): distillation on where the model has a student the
    registry builds, off where it has none (a model file: nothing to pick for it), and the
    student menu's default naming that student."""
    if model is None:  # not chosen yet (a catalogue's menu before a name is typed)
        return {}, {}
    student = catalog.default_student(model)
    means = f"{student}, its smaller sibling" if student else \
        "none for this model: pick one below"
    return {"distill": student is not None}, {"distill": {"student": means}}


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
    from dashboard import model_files
    folder = state.models_dir()
    local = model_files.local_run()
    pending = st.session_state.pop(model_files.PICK, None)
    if pending is not None:  # a file just added from the page: selected
        st.session_state["exp_model_file"] = pending
    files = catalog.model_files(folder)
    if files:
        first = url.initial("model", "exp_model_file", lambda t: _part(t, FILE, 0), files[0])
        file = st.selectbox("Model file", files, key="exp_model_file",
                            index=files.index(first),
                            help="The Python files of the server's models folder")
        factory = st.text_input("Factory function", key="exp_factory",
                                value=url.initial("model", "exp_factory",
                                                  lambda t: _part(t, FILE, 1), "build"),
                                help="factory(num_classes, in_channels) -> nn.Module")
        if not FACTORY.fullmatch(factory or ""):
            st.error("The factory must be a Python function name, e.g. build.")
        else:
            out.model, out.url = f"{folder / file}:{factory}", f"{file}:{factory}"
    if local:
        _add_model_file(model_files)
    else:  # a team server's models folder is its operator's
        st.caption(model_files.HOW_IT_GETS_THERE)
    if not files and not local:
        st.info("The server's models folder has no model files yet.")


def _add_model_file(model_files) -> None:
    """A local run's uploader: the file is checked as the worker loads it, written into the
    models folder and selected."""
    upload = st.file_uploader(
        "Add a model file (.py)", type=["py"], key="exp_model_upload",
        max_upload_size=model_files.MAX_MODEL_FILE_MB,
        help="Your own run (this machine only): the file is copied into the models folder "
             "(COMPRESSION_BENCH_MODELS_DIR) under a plain name, once it imports and has the "
             "factory function named below. It defines factory(num_classes, in_channels) -> "
             "nn.Module (docs/models-and-data.md, Your own model).")
    if upload is None:
        return
    done = st.session_state.setdefault(model_files.ADDED, {})
    if upload.file_id not in done:
        factory = st.session_state.get("exp_factory") or "build"
        if not FACTORY.fullmatch(factory):
            factory = "build"
        done[upload.file_id] = model_files.add(upload, factory)
        name, _ = done[upload.file_id]
        if name is not None:
            st.session_state[model_files.PICK] = name
            st.rerun()
    name, error = done[upload.file_id]
    if error:
        st.error(md(model_files.said(error)))
    else:
        st.caption(f"Added to the models folder as {md(name)}.")


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


def saved_checkpoint(model: ModelChoice) -> tuple[str | None, Refusal | None]:
    """The uploaded checkpoint in this session's private folder (checked with the plan; it
    moves into the job's own folder at submission), or the refusal of the upload."""
    if model.upload is None or model.language:
        return None, None
    try:
        return state.save_upload(model.upload, UPLOAD_TYPES), None
    except ValueError as exc:
        return None, Refusal(str(exc))


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


@dataclass(frozen=True)
class Fix:
    """One click that mends a refused form: a widget's key and the value it takes."""
    label: str
    key: str
    value: object


class Refusal(ValueError):
    """Why the form cannot run, in the page's words, with the clicks that mend it."""

    def __init__(self, text: str, fixes: tuple[Fix, ...] = ()):
        super().__init__(text)
        self.fixes = fixes


TURN_DISTILL_OFF = Fix("Turn distillation off", "exp_distill", False)


def _apply(fix: Fix) -> None:
    st.session_state[fix.key] = fix.value


def refusal(problem: Refusal) -> None:
    """The refusal at the top of the page: its one sentence, and a button per fix."""
    from dashboard.model_files import said
    st.error(md(said(problem)))
    for n, fix in enumerate(problem.fixes):
        st.button(fix.label, key=f"exp_fix_{n}", on_click=_apply, args=(fix,))


def _as_sent(payload: dict) -> dict:
    """A payload as the queue holds it, its checkpoint by presence (the job's own copy lives
    elsewhere than the session's upload)."""
    import json
    out = json.loads(json.dumps(payload, default=str))
    if "checkpoint" in out:
        out["checkpoint"] = bool(out["checkpoint"])
    return out


def runs_the_plan(job, planned) -> bool:
    """Whether ``job`` runs exactly what the form plans now (``planned``: its spec or
    request, None while refused)."""
    return job is not None and planned is not None and \
        _as_sent(job.payload or {}) == _as_sent(planned.to_dict())


def _flag_words() -> dict[str, str]:
    """Each command-line flag the engine's messages name, as the page names its widget."""
    from optimizers import registry
    words = {"--epochs": "Training epochs", "--batch-size": "Batch size",
             "--seeds": "Repeats (seeds)", "--combine": "Combine", "--student": "a student",
             "--input-shape": "input shape", "--eval-batch-size": "Eval batch sizes",
             "--runtime": "Runtimes", "--threads": "Threads", "--normalize":
             "Input normalisation", "--checkpoint": "your checkpoint", "--weights": "Weights",
             "--max-variants": "the variant cap", "--labels": "the ImageNet-ids box"}
    for technique in registry.techniques():
        for setting_name, _, _ in technique.fields():
            words.setdefault(technique.flag(setting_name),
                             f"{settings_form.label(setting_name)} ({technique.name})")
        words.setdefault(technique.switch_flag, technique_form.switch_label(
            technique.description))
    return words


def page_words(text: str) -> str:
    """An engine's one line with its command-line flags in the page's words."""
    words = _flag_words()
    return re.sub(r"--[a-z0-9][a-z0-9-]*", lambda m: words.get(
        m.group(0), m.group(0).lstrip("-").replace("-", " ")), text)


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

    def _students(self) -> None:
        """Distillation's refusals in the page's words, with their fixes: a model with no
        student to default to and none picked, a student trained for 0 epochs."""
        if "distill" not in self.enabled:
            return
        picked = self.choices.get(("distill", "student"))
        picked = picked if isinstance(picked, tuple) else (picked,)
        if None in picked and catalog.default_student(self.model.model) is None:
            raise Refusal(f"{self.model.url or self.model.model} has no smaller sibling to "
                          f"distil into: pick a student under distillation, or turn "
                          f"distillation off.", (TURN_DISTILL_OFF,))
        own = self.choices.get(("distill", "epochs"))
        if int(self.budget["epochs"]) == 0 and own is None:
            raise Refusal("Distillation trains its student for the training epochs, which "
                          "are 0 here: give it epochs under More distill settings, or turn "
                          "distillation off.", (TURN_DISTILL_OFF,))

    def plan(self, checkpoint: str | None = None):
        """(spec, None), or (None, the ``Refusal`` saying why not): the refusals the worker
        would make before its data loads (the techniques', the model's, and where a model
        file or a checkpoint says more once built, ``model_files.check``), in the page's
        words. For a language model, (its LMRequest, None)."""
        from benchmarks.run.checks import preflight as technique_refusals
        from benchmarks.zoo.models import preflight
        from dashboard import model_files
        try:
            if self.model.language:
                return self.lm_request(), None
            self._students()
            spec = self.spec(checkpoint)
            preflight(spec.model, spec.weights)  # an unknown name, weights not in the caches
            technique_refusals(spec)             # the worker's own, before it builds
            refused = model_files.check(spec)
            if refused:  # a student that does not build is distillation's to switch off
                fixes = (TURN_DISTILL_OFF,) if "student" in refused and \
                    "distill" in self.enabled else ()
                raise Refusal(page_words(refused), fixes)
            return spec, None
        except Refusal as exc:
            return None, exc
        except ValueError as exc:
            return None, Refusal(page_words(str(exc)))


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
