"""Property-based checks of hostile and broken input (hypothesis): sweep settings, CLI
arguments, checkpoints and image files. Every input is accepted or refused with one line;
never a traceback, a hang, or a half-written store."""

from __future__ import annotations

import json
import math
import struct
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from benchmarks.cli.main import main
from benchmarks.report.results import VariantResult
from benchmarks.run import runner
from benchmarks.spec.sweep import SweepSpec
from benchmarks.zoo.checkpoints import load_into, read_state_dict
from benchmarks.zoo.models import create_model

SETTINGS = settings(max_examples=50, deadline=timedelta(seconds=30), database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

junk = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.binary(max_size=6), st.lists(st.integers(-3, 9), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def toggle(valid: list):
    return st.one_of(st.sampled_from(valid), junk)


TOGGLES = {
    "prune": toggle([None, 0.0, 0.5, 0.95, 0.96, -0.1]),
    "prune_method": toggle(["l1", "global", "channel"]),
    "finetune_epochs": toggle([0, 1, 3]),
    "distill": toggle([True, False]),
    "temperature": toggle([0.5, 4.0, 100.0]),
    "alpha": toggle([0.0, 0.7, 1.0]),
    "student": toggle([None, "seed_cnn_narrow"]),
    "amp": toggle([False, True, "fp16", "bf16"]),
    "int8": toggle([None, "dynamic", "static", "qat"]),
    "combine": toggle([True, False]),
    "calibration_batches": toggle([1, 8]),
    "model": toggle(["seed_cnn", "mlp"]),
    "dataset": toggle(["digits", "synthetic"]),
    "device": toggle(["auto", "cpu", "cuda"]),
    "batch_size": toggle([1, 32, 65536]),
    "epochs": toggle([1, 8]),
    "seed": toggle([0, 2**32 - 1]),
    "threads": toggle([None, 1, 4]),
    "min_time_s": toggle([0.0, 1.0, 600.0]),
    "input_shape": toggle([None, (1, 8, 8), [3, 16, 16], (3, 0, 8), (3, 8)]),
    "checkpoint": toggle([None, "w.safetensors"]),
    "data_root": toggle([None, "/data"]),
    "download": toggle([True, False]),
}


def one_line_value_error(exc: ValueError) -> None:
    text = str(exc)
    assert text.strip() and "\n" not in text, repr(text)


@SETTINGS
@given(st.fixed_dictionaries({}, optional=TOGGLES))
def test_from_toggles_accepts_or_refuses_with_one_line(kwargs):
    try:
        spec = SweepSpec.from_toggles(**kwargs)
    except ValueError as exc:
        one_line_value_error(exc)
        return
    # Accepted: a usable, self-consistent spec.
    assert spec.variants[0].techniques == ()
    assert isinstance(spec.download, bool)
    assert spec.input_shape is None or (
        len(spec.input_shape) == 3 and all(type(d) is int and d >= 1 for d in spec.input_shape))
    for v in spec.variants:
        assert len(v.stable_hash()) == 16
        if v.prune is not None:
            assert 0.0 <= v.prune.ratio <= 0.95
        if v.distill is not None:
            assert 0 < v.distill.temperature <= 100 and 0 <= v.distill.alpha <= 1
    assert math.isfinite(spec.min_time_s)
    assert SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


# -- the command line, in process ----------------------------------------------------------

@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Read-only files the generated arguments point at."""
    from safetensors.torch import save_file
    d = tmp_path_factory.mktemp("cli-inputs")
    (d / "good.py").write_text(
        "from torch import nn\n"
        "def build(num_classes, in_channels):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 64, num_classes))\n")
    (d / "junk.pt").write_bytes(b"\x00garbage" * 50)
    (d / "junk.db").write_bytes(b"not sqlite" * 100)
    torch.save({"w": torch.zeros(1)}, d / "wrong.pt")
    model = create_model("seed_cnn", 10, 1, (8, 8))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(d / "good.safetensors"))
    (d / "empty-root").mkdir()
    return d


def values(*fixed: str):
    return st.one_of(st.sampled_from(fixed), st.text(max_size=8))


NUMBERS = ("nan", "inf", "-inf", "-1", "0", "1e308", "abc", "", "0x10", " 3", "1e-9",
           "99999999999999999999999")
FLAGS = {
    "--model": values("seed_cnn", "seed_cnn_narrow", "mlp", "mlp_small", "nope",
                      "{in}/good.py:build", "{in}/good.py:nothing", "{in}/none.py:f",
                      "{in}/good.py:1bad", ":", ".py:", "torchvision:mobilenet_v3_small",
                      "torchvision:resnt50", "timm:", "timm:nope"),
    # No weights are in the (private) caches: refused in one line, or not a catalogue model.
    "--weights": values("DEFAULT", "pretrained", "IMAGENET1K_V9"),
    "--labels": values("imagenet", "coco"),
    "--checkpoint": values("{in}/junk.pt", "{in}/wrong.pt", "{in}/good.safetensors",
                           "{in}/none.safetensors", "{in}/model.onnx", "{in}"),
    "--dataset": values("digits", "digits", "synthetic", "cifar10", "imagefolder:",
                        "imagefolder:{in}/empty-root", "imagefolder:{in}/nowhere", "mnist"),
    "--input-shape": values("1,8,8", "3,16,16", "1,16,16", "3,4096,4096", "0,1,1", "a,b,c",
                            "1,8", "-1,8,8", "1,8,8,8"),
    "--data-root": values("{in}/empty-root", "{in}/nowhere"),
    "--prune": st.one_of(st.sampled_from(("0.5", "0", "0.95", "0.96", "-0.1") + NUMBERS),
                         st.floats().map(repr)),
    "--prune-method": values("l1", "global", "channel", "random"),
    "--finetune-epochs": values("0", "1", "-1", "1001", "1.5", "x"),
    "--distill": st.just(None),
    "--temperature": st.one_of(st.sampled_from(NUMBERS), st.floats().map(repr)),
    "--alpha": st.one_of(st.sampled_from(NUMBERS + ("0.5", "1")), st.floats().map(repr)),
    "--student": values("seed_cnn_narrow", "mlp_small", "nope", ""),
    "--amp": st.sampled_from([None, "fp16", "bf16", "fp8"]),
    "--int8": values("dynamic", "static", "qat", "int4"),
    "--calibration-batches": values("1", "8", "0", "-1", "10001"),
    "--combine": st.just(None),
    "--device": values("auto", "cpu", "cuda", "tpu"),
    "--batch-size": values("1", "32", "256", "0", "-3", "65537", "1e3"),
    "--epochs": values("1", "2", "0", "-1", "10001"),
    "--seed": values("0", "7", "-1", "4294967296"),
    "--threads": values("1", "0", "2000"),
    "--min-time": values("0", "0.01", "-1", "601", "nan", "inf"),
    "--json": values("{out}/r.json", "{out}/nowhere/r.json", "{out}", ""),
    "--csv": values("{out}/r.csv", "{out}/nowhere/r.csv", "{out}"),
    "--store": values("{out}/s.db", "{out}/sub/s2.db", "{out}", "{in}/junk.db"),
    "--no-cache": st.just(None),
    "--bogus": st.just(None),
}
JUNK_TOKENS = st.one_of(st.sampled_from(["-x", "extra", "--", "--prune", "-q"]),
                        st.text(max_size=6))


@st.composite
def argvs(draw):
    command = draw(st.sampled_from(["run"] * 8 + ["history", "list", "bogus", ""]))
    argv: list[str] = []
    for flag in draw(st.lists(st.sampled_from(sorted(FLAGS)), max_size=6)):
        argv.append(flag)
        value = draw(FLAGS[flag])
        if value is not None:
            argv.append(value)
    argv += draw(st.lists(JUNK_TOKENS, max_size=1))
    return command, argv


def _fake_run(self, on_progress=None, should_stop=None, on_partial=None, on_environment=None):
    """Measuring is tested elsewhere; here only validation and bookkeeping run."""
    for v in self.spec.variants:
        yield VariantResult.of(name=v.name, techniques=list(v.techniques), config=v.config(),
                               batch_size=self.spec.batch_size, accuracy=0.5,
                               latency_samples_ms=[1.0] * 10, size_bytes=100, size_gzip_bytes=50)


def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in d.rglob("*")}


@SETTINGS
@given(argvs())
def test_cli_accepts_or_refuses_with_one_line_and_exit_2(inputs, tmp_path_factory, monkeypatch,
                                                         capsys, case):
    monkeypatch.setattr(runner.PreparedSweep, "run", _fake_run)
    command, generated = case
    out = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    # Generated text can be a relative output path (--csv, --store): it lands here, where the
    # "nothing written" check below sees it, never in the repository the tests run from.
    monkeypatch.chdir(out)
    # Generated flags come last, so they override these cheap defaults.
    forced = ["--store", str(out / "forced.db"), "--quiet", "--min-time", "0.01",
              "--epochs", "1"] if command == "run" else []
    argv = [command, *forced,
            *(a.replace("{in}", str(inputs)).replace("{out}", str(out)) for a in generated)]
    before = _snapshot(inputs)
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # only --help / -h end this way
        assert exc.code == 0, argv
        return
    stdout, stderr = capsys.readouterr()
    event(f"exit {code}")
    assert "Traceback" not in stderr
    assert _snapshot(inputs) == before, argv  # nothing the user gave is modified
    if code == 2:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, stderr)
        assert list(out.iterdir()) == [], (argv, list(out.iterdir()))  # nothing written
        return
    assert code == 0, (argv, code, stderr)
    if command == "run":
        assert "variant" in stdout.splitlines()[0]
        store = argv[len(argv) - 1 - argv[::-1].index("--store") + 1]
        assert Path(store).is_file()


# -- the distributed command and its config -------------------------------------------------

DIST_FIELDS = {
    "workers": toggle([(1,), (1, 2), [2, 1], (0,), (1, 1), ()]),
    "compressions": toggle([("none",), ("fp16", "bf16"), ["none"], ("zip",)]),
    "amp": toggle([True, False]),
    "steps": toggle([1, 3, 100_000, 100_001]),
    "batch_size": toggle([1, 32]),
    "device": toggle(["auto", "cpu"]),
    "timeout_s": toggle([0.5, 120, 86_400.0]),
    "port": toggle([None, 1, 65535, 65536]),
    "input_shape": toggle([None, (1, 8, 8), [3, 16, 16], (3, 8)]),
    "dataset": toggle(["digits", "synthetic", "imagefolder:/x", "imagefolder:"]),
    "crash_rank": toggle([None, 0, 1]),
    "executor": toggle(["local", "ray"]),
}


@SETTINGS
@given(st.fixed_dictionaries({}, optional=DIST_FIELDS))
def test_distributed_config_accepts_or_refuses_with_one_line(kwargs):
    from benchmarks.spec.distributed import DistributedConfig
    try:
        config = DistributedConfig(**kwargs)
    except ValueError as exc:
        one_line_value_error(exc)
        return
    assert config.workers == tuple(sorted(set(config.workers))) and config.workers[0] >= 1
    assert isinstance(config.compressions, tuple) and isinstance(config.amp, bool)
    assert DistributedConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


DIST_FLAGS = {
    "--model": values("seed_cnn", "mlp", "nope", "{in}/good.py:build"),
    "--dataset": values("digits", "synthetic", "imagefolder:", "imagefolder:{in}/empty-root",
                        "mnist"),
    "--workers": values("1", "1,2", "2,1", "3", "0", "1,1", "1,x", "999"),
    "--compression": values("none", "fp16,bf16", "zip", "none,none"),
    "--amp": st.just(None),
    "--steps": values("3", "0", "100001", "x"),
    "--batch-size": values("1", "16", "0", "65537", "1e3", "2000"),
    "--device": values("cpu", "auto", "tpu"),
    "--seed": values("0", "-1", "4294967296"),
    "--timeout": values("1", "0", "nan", "inf"),
    "--port": values("1", "65536", "x"),
    "--input-shape": values("1,8,8", "3,8", "0,1,1", "a,b,c"),
    "--data-root": values("{in}/empty-root"),
    "--crash-rank": values("0", "-1"),
    "--json": values("{out}/d.json", "{out}/nowhere/d.json", "{out}"),
    "--store": values("{out}/s.db", "{in}/junk.db"),
    "--no-store": st.just(None),
    "--bogus": st.just(None),
}


def _fake_distributed(self, on_progress=None, warn=None, *, should_stop=None, on_step=None):
    """Training is tested elsewhere (test_distributed); here only validation and records."""
    pairs = [(c, w) for c in self.config.compressions for w in self.config.workers]
    runs = []
    for done, (compression, workers) in enumerate(pairs, 1):
        run = {**self._empty_run(workers, compression), "throughput": 100.0 * workers,
               "wall_s": 0.1, "oversubscribed": False}
        runs.append(run)
        if on_progress:
            on_progress(done, len(pairs), run)
    return runs


@st.composite
def distributed_argvs(draw):
    argv = []
    for flag in draw(st.lists(st.sampled_from(sorted(DIST_FLAGS)), max_size=5)):
        argv.append(flag)
        value = draw(DIST_FLAGS[flag])
        if value is not None:
            argv.append(value)
    return argv + draw(st.lists(JUNK_TOKENS, max_size=1))


@SETTINGS
@given(distributed_argvs())
def test_distributed_cli_accepts_or_refuses_with_one_line_and_exit_2(
        inputs, tmp_path_factory, monkeypatch, capsys, generated):
    from benchmarks.distributed import launcher
    monkeypatch.setattr(launcher.PreparedDistributed, "run", _fake_distributed)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    out = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    monkeypatch.chdir(out)
    argv = ["distributed", "--store", str(out / "forced.db"), "--device", "cpu", "--steps", "3",
            *(a.replace("{in}", str(inputs)).replace("{out}", str(out)) for a in generated)]
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # only --help / -h end this way
        assert exc.code == 0, argv
        return
    stdout, stderr = capsys.readouterr()
    event(f"exit {code}")
    assert "Traceback" not in stderr
    if code == 2:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, stderr)
        assert list(out.iterdir()) == [], (argv, list(out.iterdir()))  # nothing written
        return
    assert code == 0, (argv, code, stderr)
    assert "w1-" in stdout or "w2-" in stdout or "w3-" in stdout, stdout


# -- checkpoints -----------------------------------------------------------------------------

def _valid_files(d: Path) -> dict[str, bytes]:
    from safetensors.torch import save_file
    state = {k: v.contiguous() for k, v in create_model("seed_cnn_narrow", 10, 1, (8, 8))
             .state_dict().items()}
    save_file(state, str(d / "v.safetensors"))
    torch.save(state, d / "v.pt")
    torch.save(state, d / "legacy.pth", _use_new_zipfile_serialization=False)
    return {p: (d / p).read_bytes() for p in ("v.safetensors", "v.pt", "legacy.pth")}


@pytest.fixture(scope="module")
def valid_checkpoints(tmp_path_factory):
    return _valid_files(tmp_path_factory.mktemp("valid-ckpt"))


def _read(tmp: Path, name: str, data: bytes):
    path = tmp / name
    path.write_bytes(data)
    try:
        return read_state_dict(path)
    except ValueError as exc:
        one_line_value_error(exc)
        assert name in str(exc)
        return None


@SETTINGS
@given(data=st.binary(max_size=2048), suffix=st.sampled_from([".pt", ".pth", ".safetensors"]))
def test_random_bytes_are_refused_with_one_line(tmp_path_factory, data, suffix):
    tmp = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    assert _read(tmp, f"random{suffix}", data) is None


@SETTINGS
@given(which=st.sampled_from(["v.safetensors", "v.pt", "legacy.pth"]), cut=st.floats(0, 1),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=4))
def test_truncated_or_corrupted_checkpoints(tmp_path_factory, valid_checkpoints, which, cut,
                                            flips):
    tmp = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    data = valid_checkpoints[which]
    truncated = data[: int(cut * (len(data) - 1))]
    assert _read(tmp, which, truncated) is None
    mutated = bytearray(data)
    for where, byte in flips:
        mutated[int(where * (len(data) - 1))] = byte
    state = _read(tmp, which, bytes(mutated))  # a flipped weight byte is still data
    if state is not None:
        assert all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())


DTYPES = ["F32", "F16", "BF16", "F64", "I64", "I32", "I8", "U8", "BOOL", "C64", "F8_E4M3",
          "F4", "NOPE", ""]
tensor_entry = st.fixed_dictionaries({
    "dtype": st.sampled_from(DTYPES),
    "shape": st.lists(st.integers(-2, 2**40), max_size=3),
    "data_offsets": st.lists(st.integers(0, 2**40), min_size=0, max_size=3)})


json_junk = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
                      st.lists(st.integers(), max_size=3))


@SETTINGS
@given(header=st.dictionaries(st.text(max_size=6), st.one_of(tensor_entry, json_junk),
                              max_size=3),
       body=st.integers(0, 256), lie=st.integers(-16, 2**63))
def test_safetensors_headers_that_lie(tmp_path_factory, header, body, lie):
    tmp = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    raw = json.dumps(header).encode()
    honest = struct.pack("<Q", len(raw)) + raw + b"\0" * body
    state = _read(tmp, "h.safetensors", honest)
    if state is not None:  # accepted only when every tensor really fits the body
        assert sum(t.numel() * t.element_size() for t in state.values()) <= body
    liar = struct.pack("<Q", max(0, min(lie, 2**64 - 1))) + raw + b"\0" * body
    _read(tmp, "h.safetensors", liar)


shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4)


@SETTINGS
@given(entries=st.dictionaries(
    st.sampled_from(["0.weight", "0.bias", "2.weight", "2.bias", "5.weight", "5.bias", "x"]),
    st.tuples(shapes, st.sampled_from([torch.float32, torch.float16, torch.int64,
                                       torch.bool, torch.complex64])), max_size=7),
    fmt=st.sampled_from([".pt", ".safetensors"]))
def test_state_dicts_with_wrong_keys_shapes_or_dtypes(tmp_path_factory, entries, fmt):
    from safetensors.torch import save_file
    tmp = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    state = {k: torch.zeros(s, dtype=dt) for k, (s, dt) in entries.items()}
    path = tmp / f"s{fmt}"
    if fmt == ".pt":
        torch.save(state, path)
    else:
        save_file(state, str(path))
    model = create_model("seed_cnn_narrow", 10, 1, (8, 8))
    try:
        load_into(model, read_state_dict(path), path.name)
    except ValueError as exc:
        one_line_value_error(exc)
        return
    assert set(state) == set(model.state_dict())  # accepted only when it really matches


# -- image files -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    from PIL import Image
    root = tmp_path_factory.mktemp("imgs")
    for cls in ("a", "b"):
        (root / cls).mkdir()
        for i in range(4):
            Image.new("L", (8, 8), 30 * i).save(root / cls / f"{i}.png")
    return root


@settings(max_examples=40, deadline=timedelta(seconds=30), database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=512),
                      st.sampled_from([b"P1\n2 2\n0 1 1 0\n", b"BM" + b"\0" * 60,
                                       b"GIF89a" + b"\xff" * 20, b"\x89PNG\r\n\x1a\n" * 3])),
       suffix=st.sampled_from([".png", ".jpg", ".gif", ".bmp", ".tiff", ".webp"]))
def test_any_bytes_with_an_image_suffix_load_or_are_one_line(image_folder, data, suffix):
    from benchmarks.zoo.datasets import load_dataset
    hostile = image_folder / "b" / f"hostile{suffix}"
    hostile.write_bytes(data)
    try:
        bundle = load_dataset(f"imagefolder:{image_folder}", input_shape=(1, 8, 8))
    except ValueError as exc:
        one_line_value_error(exc)
        assert "hostile" in str(exc)
    else:
        assert bundle.num_classes == 2 and bool(torch.isfinite(bundle.train.x[:]).all())
    finally:
        hostile.unlink()
