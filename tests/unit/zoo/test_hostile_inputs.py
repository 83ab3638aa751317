"""Hostile files, refused in one line before anything in them runs or is allocated: pickled
code in checkpoints (zip and raw, protocol 0 and 2), state dicts that are not one, dtypes that
cannot load, safetensors headers that lie, and image folders that are not what they claim
(from the hardening issue; the process-level faults are in tests/system/test_hardening.py)."""

from __future__ import annotations

import json
import os
import pickle
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
import torch

from benchmarks.zoo.checkpoints import load_into, read_state_dict
from benchmarks.zoo.datasets import load_dataset
from benchmarks.zoo.models import create_model


# -- hostile checkpoints (beyond test_checkpoints.py) --------------------------------

class _System:
    """Pickles as a call to os.system: a checkpoint that would run a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Exec:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def _zip_with_data_pkl(valid: Path, out: Path, payload: bytes) -> None:
    """A real torch zip checkpoint with its data.pkl swapped for ``payload``."""
    with zipfile.ZipFile(valid) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = payload if info.filename.endswith("/data.pkl") else src.read(info)
            dst.writestr(info, data)


@pytest.mark.parametrize("make", ["_System", "_Exec", "protocol0"])
@pytest.mark.parametrize("container", ["zip", "raw"])
def test_checkpoints_that_run_code_are_refused_before_it_runs(make, container, tmp_path):
    marker = tmp_path / "PWNED"
    if make == "protocol0":  # hand-written: GLOBAL posix.system, no Python class needed
        payload = f"cposix\nsystem\n(Vtouch {marker}\ntR.".encode()
    else:
        payload = pickle.dumps({"0.weight": globals()[make](marker)}, protocol=2)
    path = tmp_path / "evil.pt"
    if container == "zip":
        valid = tmp_path / "valid.pt"
        torch.save({"0.weight": torch.zeros(2)}, valid)
        _zip_with_data_pkl(valid, path, payload)
    else:
        path.write_bytes(payload)
    with pytest.raises(ValueError, match="refused|corrupt") as err:
        read_state_dict(path)
    assert "\n" not in str(err.value)
    assert not marker.exists()


def test_a_zip_checkpoint_whose_data_pkl_runs_code_names_it(tmp_path):
    marker = tmp_path / "PWNED"
    valid, evil = tmp_path / "valid.pt", tmp_path / "evil.pth"
    torch.save({"0.weight": torch.zeros(2)}, valid)
    _zip_with_data_pkl(valid, evil, pickle.dumps(_System(marker), protocol=2))
    with pytest.raises(ValueError, match="carries pickled code, which is refused"):
        read_state_dict(evil)
    assert not marker.exists()


def test_non_tensor_and_nested_state_dicts_are_refused(tmp_path):
    for i, obj in enumerate([{"0.weight": 5}, {"a": {"b": torch.zeros(1)}},
                             {1: torch.zeros(1)}, "weights", None]):
        path = tmp_path / f"s{i}.pt"
        torch.save(obj, path)
        with pytest.raises(ValueError, match="not a state_dict"):
            read_state_dict(path)


def test_right_keys_and_shapes_with_an_unusable_dtype_is_one_line(tmp_path):
    model = create_model("seed_cnn", 10, 1, (8, 8))
    state = {k: torch.zeros(v.shape, dtype=torch.complex64) for k, v in
             model.state_dict().items()}
    with pytest.raises(ValueError, match="complex.pt does not match the model "
                                         r"\(dtype mismatch: 0.weight torch.complex64") as err:
        load_into(model, state, "complex.pt")
    assert "\n" not in str(err.value)


def test_safetensors_header_that_lies_about_offsets_dtypes_and_shapes(tmp_path):
    def write(header: dict, body: bytes) -> Path:
        raw = json.dumps(header).encode()
        path = tmp_path / "lie.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
        return path

    lies = [
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1000]}},      # past the end
        {"w": {"dtype": "F32", "shape": [400], "data_offsets": [0, 16]}},      # shape > data
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}},        # reversed
        {"w": {"dtype": "NOPE", "shape": [4], "data_offsets": [0, 16]}},       # no such dtype
        {"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 16]}},       # negative dim
        {"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 16]}},  # overflow
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "v": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},        # overlapping
        {"w": "not a tensor"},
    ]
    for header in lies:
        with pytest.raises(ValueError, match="corrupt|truncated") as err:
            read_state_dict(write(header, b"\0" * 16))
        assert "\n" not in str(err.value)


# -- image folders -------------------------------------------------------------------------

def _png(path: Path, color: int = 0, size: int = 8) -> None:
    from PIL import Image
    Image.new("RGB", (size, size), (color, color, color)).save(path)


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header claims width x height pixels, with almost no data behind it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def _folder(root: Path, counts: dict[str, int]) -> str:
    for cls, n in counts.items():
        (root / cls).mkdir(parents=True)
        for i in range(n):
            _png(root / cls / f"{i}.png", color=40 * i)
    return str(root)


def _refused(dataset: str, match: str) -> str:
    with pytest.raises(ValueError, match=match) as err:
        load_dataset(dataset, input_shape=(3, 8, 8))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_image_folder_text_file_with_image_suffix(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 3, "b": 3})
    (tmp_path / "imgs" / "b" / "notes.png").write_text("this is not an image\n" * 10)
    assert "notes.png is not a readable image" in _refused(f"imagefolder:{root}", "readable")


def test_image_folder_decompression_bomb_header(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 3, "b": 3})
    _png_header_only(tmp_path / "imgs" / "a" / "bomb.png", 60000, 60000)
    assert "bomb.png is not a readable image" in _refused(f"imagefolder:{root}", "readable")


def test_image_folder_truncated_png(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 3, "b": 3})
    good = tmp_path / "imgs" / "a" / "0.png"
    _png(good, size=64)
    good.write_bytes(good.read_bytes()[:60])
    message = _refused(f"imagefolder:{root}", "0.png is not a readable image")
    assert message.startswith("imagefolder:")


def test_image_folder_empty_class_folder(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 4, "b": 4, "empty": 0})
    assert "'empty'" in _refused(f"imagefolder:{root}", "has no images")


def test_image_folder_one_class_only_and_no_images(tmp_path):
    messages = [_refused(f"imagefolder:{_folder(tmp_path / 'one', {'a': 6})}", "at least 2"),
                _refused(f"imagefolder:{_folder(tmp_path / 'none', {'a': 0, 'b': 0})}",
                         "no images"),
                _refused("imagefolder:" + str(tmp_path / "missing"), "is not a directory")]
    assert all(m.startswith("imagefolder:") for m in messages), messages


def test_image_folder_that_is_fine_loads(tmp_path):
    data = load_dataset(f"imagefolder:{_folder(tmp_path / 'ok', {'a': 4, 'b': 4})}",
                        input_shape=(3, 8, 8))
    assert data.num_classes == 2 and data.input_shape == (3, 8, 8)
