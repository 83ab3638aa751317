"""Runtime cells: every variant under each runtime, at each batch size and thread count of
the sweep's deployment axes (``--runtime``, ``--eval-batch-size``, ``--threads``), one row of
the run each, timed in the same interleaved rounds as the variants themselves.

A variant's first row is itself (eager, the first batch size, the first thread count); its
cells follow the variants, in a fixed order (runtime, batch size, threads), so every row's
position is known before anything is built. A cell:

- eager at another batch size or thread count: the same model, timed again (its accuracy,
  size and FLOPs are the variant's; its peak memory and bytes moved are measured at its
  batch);
- another runtime: ``benchmarks.runtimes.prepare`` on what that runtime deploys (the variant
  as built for compile; its float model for ONNX Runtime and OpenVINO, which quantize an INT8
  variant themselves on the engine's calibration batches), scored once per variant per
  runtime on the test split (accuracy, and parity against the eager variant's logits), its
  op census and precision recorded.

A cell is placed on the roofline by what it ran: an eager or compiled cell by its variant's
multiply-adds per precision (``measure.macs``), a graph runtime's by its own kernel census;
after timing, a cell above its roof has that peak measured again, as a variant does
(``run.roofs.check_roofs`` over variants and cells alike). A cell that cannot be built fails
with one line (the exporter's or the runtime's reason) and the sweep goes on. Speed ratios
are against the eager fp32 baseline at the same batch size and thread count
(``report.comparisons.comparison_rows``).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.measure import precisions
from benchmarks.measure.memory import measure_peak_memory, measure_traffic
from benchmarks.report.records import Provenance, Timing
from benchmarks.report.results import VariantResult
from benchmarks.report.stats import pack_bits, pack_labels
from benchmarks.run.checks import ACCURACY_BATCH
from benchmarks.run.phases import Report
from benchmarks.run.rounds import Built, release_memory
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.runtimes import EAGER
from benchmarks.spec.runtimes import get as get_runtime
from benchmarks.spec.variant import VariantSpec
from optimizers import registry
from optimizers.errors import described

# Graph runtimes deploy the float model and quantize or cast it themselves.
GRAPH_RUNTIMES = ("ort", "openvino")


@dataclass(frozen=True)
class CellKey:
    runtime: str
    batch: int
    threads: int


def cell_keys(runtimes, batches, threads) -> list[CellKey]:
    """Every (runtime, batch, threads) but the variant's own first row, in row order."""
    keys = [CellKey(r, b, t) for r in runtimes for b in batches for t in threads]
    return keys[1:]


def cell_name(variant: str, key: CellKey, first: CellKey) -> str:
    """``int8-static@ort b1 t2``: the runtime when not eager, the batch size and threads when
    not the first ones measured."""
    name = variant if key.runtime == EAGER else f"{variant}@{key.runtime}"
    if key.batch != first.batch:
        name += f" b{key.batch}"
    if key.threads != first.threads:
        name += f" t{key.threads}"
    return name


def deployed_precision(variant: VariantSpec, config: dict) -> str:
    """What the variant asks of a runtime, from the techniques' registry entries and the
    precision registry: an integer precision where a step quantizes (whichever path the
    engine's own INT8 took: its declared precision at its defaults), else the first
    deployable one a step declares (AMP's bf16/fp16), else fp32."""
    if variant.control is not None:
        return precisions.DEFAULT
    declared = []
    for name in variant.techniques:
        technique = registry.get(name)
        precision = technique.precision(config.get(name) or {}) or technique.precision({})
        if precisions.known(precision) and precisions.get(precision).deployable:
            declared.append(precisions.get(precision))
    integer = [p for p in declared if p.integer]
    return (integer or declared or [precisions.get(precisions.DEFAULT)])[0].name


def float_prefix(variant: VariantSpec) -> VariantSpec | None:
    """The variant without its steps applied over float weights (INT8's conversion, AMP's
    autocast): the float model a graph runtime deploys; None when it is the variant itself."""
    if variant.control is not None:
        return None
    keep = [t for t in variant.techniques if registry.get(t).export == "weights"]
    if len(keep) == len(variant.techniques):
        return None
    return VariantSpec(f"{variant.name} (float)", tuple(keep),
                       {t: s for t, s in variant.settings if t in keep})


class Cells:
    """The runtime cells of one prepared sweep, built variant by variant."""

    def __init__(self, sweep):
        spec = sweep.spec
        self.sweep = sweep
        self.batches, self.threads = sweep.eval_batches, sweep.thread_counts
        self.first = CellKey(EAGER, self.batches[0], self.threads[0])
        self.keys = cell_keys(spec.runtimes, self.batches, self.threads)
        self.count = len(spec.variants)
        self.float_model = None  # the variant being built's, for its graph runtimes (build)
        self.folder = Path(tempfile.mkdtemp(prefix="compression-bench-runtimes-"))
        self.examples = {b: sweep.data.example_batch(b) for b in self.batches}
        # One ONNX file per float model: a static INT8 variant deploys the baseline's own.
        self.onnx_files: dict[int, tuple] = {}

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def axes(self, key: CellKey) -> dict:
        out = {}
        if len(self.batches) > 1:
            out["eval_batch_size"] = key.batch
        if len(self.threads) > 1:
            out["threads"] = key.threads
        return out

    def annotate(self, b: Built) -> None:
        """A variant's own row as the eager cell it is: its axes and runtime entry."""
        from benchmarks.runtimes.census import module_census
        from benchmarks.runtimes.eager import torch_precision
        result = b.result
        result.axes.update(self.axes(self.first))
        entry = {"name": EAGER, "version": torch.__version__, "variant": result.name,
                 "batch_size": self.first.batch, "threads": self.first.threads,
                 "prepare_s": 0.0, "first_call_ms": None}
        if b.model is not None:
            ops = module_census(b.model).to_dict()
            entry.update(precision=torch_precision(ops, precisions.DEFAULT, b.autocast_dtype),
                         ops=ops)
        result.runtime = entry

    def build(self, b: Built, variant: VariantSpec, report: Report, stop) -> list[Built]:
        """Every cell of the variant whose first row is ``b`` (its model resident); where the
        sweep carries a ``cell_plan`` ({variant index: runtimes}, a recommendation's wave),
        only the cells of the runtimes it names for this variant."""
        self.annotate(b)
        prepared: dict = {}   # (runtime, threads) -> Prepared or the reason it failed
        scored: dict = {}     # runtime -> accuracy figures, scored once
        eager_logits: dict = {}
        # The float model the graph runtimes deploy, rebuilt once for all of this variant's
        # cells (ONNX Runtime, OpenVINO and the fp32 parity check), and let go after them.
        self.float_model = None
        try:
            return self._cells(b, variant, report, stop, prepared, scored, eager_logits)
        finally:
            self.float_model = None

    def _cells(self, b: Built, variant: VariantSpec, report: Report, stop, prepared: dict,
               scored: dict, eager_logits: dict) -> list[Built]:
        out = []
        plan = getattr(self.sweep, "cell_plan", None)
        for j, key in enumerate(self.keys):
            if plan is not None and key.runtime not in plan.get(b.index, ()):
                continue
            if stop():
                raise Cancelled()
            cell = self._cell(b, variant, key, self.count + b.index * len(self.keys) + j)
            out.append(cell)
            if cell.result.error is not None:
                continue
            report(variant.name, b.index, f"{key.runtime} b{key.batch} t{key.threads}", 0.0)
            try:
                if key.runtime == EAGER:
                    self._eager(b, cell, key)
                else:
                    self._runtime(b, variant, cell, key, prepared, scored, eager_logits)
            except Cancelled:
                raise
            except Exception as exc:  # one cell's failure never sinks the sweep
                cell.result.error = f"{key.runtime} failed: {described(exc)}"
                cell.model = None
                release_memory()
        return out

    def _cell(self, b: Built, variant: VariantSpec, key: CellKey, position: int) -> Built:
        base = b.result
        result = VariantResult(
            name=cell_name(base.name, key, self.first), techniques=list(base.techniques),
            config=dict(base.config), device=base.device, timing=Timing(batch_size=key.batch),
            axes={**variant.axes_dict(), **self.axes(key)},
            provenance=Provenance(started_at=time.strftime("%Y-%m-%dT%H:%M:%S")))
        result.runtime = {"name": key.runtime, "version": get_runtime(key.runtime).version(),
                          "variant": base.name, "batch_size": key.batch,
                          "threads": key.threads}
        for name in ("params", "nonzero_params", "flops", "flops_effective", "layer_sparsity"):
            setattr(result.cost, name, getattr(base.cost, name))
        if key.runtime not in GRAPH_RUNTIMES:
            # The same modules run (compiled or not): the same precision per multiply-add. A
            # graph runtime's comes from its own kernel census (its runtime precision).
            result.cost.mac_census = base.cost.mac_census
        cell = Built(b.index, result, device=b.device, threads=key.threads, position=position)
        if base.error is not None or b.model is None:
            result.error = f"its variant failed: {base.error or 'not built'}"
        return cell

    def _eager(self, b: Built, cell: Built, key: CellKey) -> None:
        """The variant itself at another batch size or thread count."""
        from benchmarks.runtimes.base import timed_first_call
        r, base = cell.result, b.result
        # The same weights: the same scores and the same bytes on disk.
        r.scores = dataclasses.replace(base.scores, seeds=list(base.scores.seeds),
                                       seed_accuracies=list(base.scores.seed_accuracies))
        r.cost.size_bytes, r.cost.size_gzip_bytes = base.cost.size_bytes, base.cost.size_gzip_bytes
        example = self._example(b, key.batch)
        r.cost.peak_memory_bytes, r.cost.memory_method = measure_peak_memory(
            b.model, example, b.device, autocast=b.autocast())
        r.cost.traffic_bytes = measure_traffic(b.model, example, b.device, autocast=b.autocast())
        with _threads(key.threads):
            first = timed_first_call(_under(b.model, b), example.to(b.device))
        r.runtime.update({k: v for k, v in base.runtime.items()
                          if k in ("version", "precision", "ops")},
                         prepare_s=0.0, first_call_ms=first)
        cell.model, cell.autocast_dtype, cell.example = b.model, b.autocast_dtype, example

    def _example(self, b: Built, batch: int):
        example = self.examples[batch]
        return example if b.example is None or b.example.is_contiguous() else \
            example.contiguous(memory_format=torch.channels_last)

    def _runtime(self, b: Built, variant: VariantSpec, cell: Built, key: CellKey,
                 prepared: dict, scored: dict, eager_logits: dict) -> None:
        from benchmarks.runtimes.base import timed_first_call
        r = cell.result
        ready = prepared.get((key.runtime, key.threads))
        if ready is None:
            try:
                ready = self._prepare(b, variant, key)
            except Exception as exc:  # its other batch sizes fail alike, prepared once
                ready = exc
            prepared[(key.runtime, key.threads)] = ready
        if isinstance(ready, Exception):
            raise ready
        graph = key.runtime in GRAPH_RUNTIMES
        device = b.device
        example = self._example(b, key.batch).to(device)
        with _threads(key.threads):
            first = timed_first_call(_under(ready.fn, b, graph), example)
        if key.runtime not in scored:
            t0 = time.perf_counter()
            scored[key.runtime], logits, batch = self._score(b, ready, graph, eager_logits)
            if graph and float_prefix(variant) is not None:
                self._against_fp32(b, variant, scored[key.runtime], logits, batch,
                                   eager_logits, ready, key.runtime)
            r.provenance.phase_s["accuracy"] = time.perf_counter() - t0
        figures = scored[key.runtime]
        for name in ("accuracy", "correct_bits", "n_test", "predictions"):
            setattr(r.scores, name, figures.get(name))
        if r.scores.accuracy is not None:
            r.scores.seeds, r.scores.seed_accuracies = [self.sweep.spec.seed], [r.scores.accuracy]
        r.provenance.phase_s["prepare"] = ready.prepare_s
        files = [p for p in ready.artefacts if p.exists()]
        if files:
            r.cost.size_bytes = sum(p.stat().st_size for p in files)
        else:
            r.cost.size_bytes, r.cost.size_gzip_bytes = (b.result.cost.size_bytes,
                                                         b.result.cost.size_gzip_bytes)
        r.cost.memory_method = ("not measured: the runtime's own allocator" if graph
                           else "not measured: compiled")
        r.runtime.update(version=ready.version, precision=ready.precision,
                         prepare_s=round(ready.prepare_s, 4), first_call_ms=first,
                         parity=figures["parity"], ops=ready.ops, details=ready.details)
        if ready.notes:
            r.runtime["notes"] = list(ready.notes)
            r.warnings.extend(ready.notes)
        if figures["parity"].get("note_fp32"):  # an "off" cell says which side is closer
            r.warnings.append(figures["parity"]["note_fp32"])
        cell.model, cell.example = ready.fn, example
        cell.autocast_dtype = None if graph else b.autocast_dtype

    def _prepare(self, b: Built, variant: VariantSpec, key: CellKey):
        from benchmarks.runtimes.base import Calibration, RuntimeConfig, export_onnx, prepare
        graph = key.runtime in GRAPH_RUNTIMES
        precision = deployed_precision(variant, b.result.config) if graph \
            else precisions.DEFAULT
        config = RuntimeConfig(key.runtime, precision=precision, threads=key.threads,
                               device=b.device.type)
        folder = self.folder / f"{b.index:03d}"
        folder.mkdir(exist_ok=True)
        model, calibration = b.model, None
        t0 = time.perf_counter()
        if graph:
            model = self._float_model(b, variant)
            if precisions.get(precision).integer:
                calibration = Calibration(self._calibration(variant))
        example = self.examples[key.batch]
        onnx_path = None
        if graph:
            known = self.onnx_files.get(id(model))
            onnx_path = known[1] if known else export_onnx(model, example, folder / "model.onnx")
            self.onnx_files[id(model)] = (model, onnx_path)  # the model held: its id stays
        with _threads(key.threads):
            ready = prepare(config, model, example.to(b.device), calibration=calibration,
                            workdir=folder, onnx_path=onnx_path,
                            autocast_dtype=None if graph else b.autocast_dtype)
        ready.prepare_s = time.perf_counter() - t0  # the export and float rebuild included
        return ready

    def _float_model(self, b: Built, variant: VariantSpec):
        """The float model a graph runtime deploys: the variant's own, or the float model its
        INT8 conversion / autocast was applied to (rebuilt from the weights cache)."""
        prefix = float_prefix(variant)
        if prefix is None:
            return b.model
        if self.float_model is not None:
            return self.float_model
        int8 = dict(variant.settings).get("int8")
        if int8 is not None and int8.mode != "static":
            raise RuntimeError(f"a {int8.mode} INT8 variant is not deployed to ONNX Runtime or "
                               f"OpenVINO: they quantize static INT8 themselves (--int8 static)")
        sweep = self.sweep
        outcome = sweep.build_variant(prefix, sweep.context(lambda *_: None, variant=prefix))
        self.float_model = outcome.model.cpu().eval()
        return self.float_model

    def _calibration(self, variant: VariantSpec) -> list:
        """The calibration batches the engine's own INT8 drew for this variant (the same
        key, so the same training batches)."""
        settings = dict(variant.settings)["int8"]
        ctx = self.sweep.context(lambda *_: None, variant=variant)
        return ctx.calibration(settings.calibration_batches)

    def _against_fp32(self, b: Built, variant: VariantSpec, figures: dict, logits,
                      batch: int, eager_logits: dict, ready=None, runtime: str = "") -> None:
        """For a quantized variant a graph runtime deployed: whether its outputs or eager's
        are the closer to the float model both quantized (``parity.closer_to_fp32``), in
        its parity figures; said in a note where the cell is "off", with the layer where
        the runtime's graph parts ways with the float model (``divergence``)."""
        from benchmarks.runtimes.parity import closer_to_fp32
        if "float" not in eager_logits:
            model = self._float_model(b, variant)
            eager_logits["float"] = _logits(model, self.sweep.data, batch, torch.device("cpu"))[0]
        versus = closer_to_fp32(eager_logits["float"], eager_logits[batch][0], logits)
        figures["parity"]["vs_fp32"] = versus
        where = self._parts_ways(b, variant, figures, ready, runtime, batch)
        if figures["parity"].get("badge") == "off":
            side = {"runtime": "the runtime's quantization is the closer to fp32 (eager is the "
                               "wrong reference here)",
                    "eager": "eager's quantization is the closer to fp32 (the conversion "
                             "changed the model more)"}.get(versus["closer"],
                                                           "neither is closer to fp32 beyond "
                                                           "noise")
            figures["parity"]["note_fp32"] = (
                f"off against eager; top-1 agreement with the float model: runtime "
                f"{versus['runtime_agree']:.1%}, eager {versus['eager_agree']:.1%} "
                f"(McNemar p={versus['p_value']:.2g}): {side}; {where}")

    def _parts_ways(self, b: Built, variant: VariantSpec, figures: dict, ready, runtime: str,
                    batch: int) -> str:
        """Where the runtime's graph parts ways with the float model, on the first test batch
        (``divergence``: ONNX Runtime's graph exposes its layers' values, OpenVINO's compiled
        model does not), kept in the parity figures; the sentence an "off" cell carries."""
        from benchmarks.runtimes.divergence import parts_ways, parts_ways_line
        artefacts = [p for p in getattr(ready, "artefacts", []) if p.suffix == ".onnx"]
        if runtime != "ort" or not artefacts:
            return f"{runtime} does not expose its layers' values: no layer named"
        x, _ = next(iter(self.sweep.data.batches("test", batch)))
        try:
            found = parts_ways(artefacts[0], self._float_model(b, variant), x)
        except Exception as exc:  # a diagnosis that fails leaves the cell as measured
            return f"where it parts ways could not be read ({described(exc)})"
        figures["parity"]["parts_ways"] = found
        return parts_ways_line(found)

    def _score(self, b: Built, ready, graph: bool, eager_logits: dict) -> tuple[dict, object, int]:
        """(accuracy and parity against eager, the runtime's logits, the batch size they were
        scored at), once per variant per runtime, on the test split in batches of the largest
        measured size (the last one padded: every call has a shape the runtime was prepared
        and timed at)."""
        from benchmarks.runtimes.parity import parity
        data = self.sweep.data
        batch = max([x for x in self.batches if x <= ACCURACY_BATCH] or [min(self.batches)])
        if batch not in eager_logits:
            eager_logits[batch] = _logits(_under(b.model, b), data, batch, b.device)
        reference, labels = eager_logits[batch]
        logits, _ = _logits(_under(ready.fn, b, graph), data, batch, b.device)
        figures = parity(reference, logits, labels if data.labelled else None)
        out = {"parity": figures, "accuracy": None, "correct_bits": None, "n_test": None,
               "predictions": None}
        if data.labelled:
            top = logits.argmax(1)
            right = (top == labels).tolist()
            out.update(accuracy=sum(right) / len(right), correct_bits=pack_bits(right),
                       n_test=len(right), predictions=pack_labels(top.tolist()))
        return out, logits, batch


def _logits(fn, data, batch: int, device) -> tuple:
    """(logits, labels) of the whole test split through ``fn``, in batches of ``batch``."""
    outs, labels = [], []
    with torch.inference_mode():
        for x, y in data.batches("test", batch):
            k = len(x)
            if k < batch:  # padded to the prepared shape; the padding's outputs dropped
                x = torch.cat([x, x[-1:].expand(batch - k, *x.shape[1:])])
            outs.append(fn(x.to(device))[:k].float().cpu())
            labels.append(y)
    return torch.cat(outs), torch.cat(labels)


def _under(fn, b: Built, graph: bool = False):
    """``fn`` called as the variant runs: under its autocast (eager, compile), or as is (a
    graph runtime carries its own precision)."""
    if graph or b.autocast_dtype is None:
        return fn

    def call(x):
        with b.autocast():
            return fn(x)
    return call


class _threads:
    """torch's intra-op threads set for a block (preparing and scoring at a cell's count)."""

    def __init__(self, threads: int):
        self.threads = threads

    def __enter__(self):
        self.before = torch.get_num_threads()
        torch.set_num_threads(self.threads)

    def __exit__(self, *exc):
        torch.set_num_threads(self.before)


def sync_seeds(cells: list[Built], built: list[Built]) -> None:
    """Eager cells take their variant's further seeds (scored after the cells were built)."""
    by_name = {b.result.name: b.result for b in built}
    for cell in cells:
        runtime = cell.result.runtime or {}
        base = by_name.get(runtime.get("variant"))
        if base is not None and runtime.get("name") == EAGER and cell.result.ok:
            cell.result.scores.seeds = list(base.scores.seeds)
            cell.result.scores.seed_accuracies = list(base.scores.seed_accuracies)


def energy_pass(entries: list[Built]) -> None:
    """Energy per inference of every resident row, where its device has a readable counter
    (NVML on a GPU, RAPL on a CPU): an idle second, a warm-up, then five windows of at least a
    second each, with the device's state before and after (``measure.energy``)."""
    from benchmarks.measure.energy import energy_per_inference, meter_for
    meters: dict = {}
    for b in entries:
        if b.model is None or b.result.error is not None:
            continue
        kind = b.device.type if b.device is not None else "cpu"
        if kind not in meters:
            meters[kind] = meter_for(kind, (b.device.index or 0) if b.device else 0)
        meter = meters[kind]
        if meter is None:
            continue
        x = b.example.to(b.device)
        sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
        fn = _under(b.model, b, graph=b.autocast_dtype is None)
        with torch.inference_mode(), _threads(b.threads or torch.get_num_threads()):
            b.result.cost.energy = energy_per_inference(
                lambda: fn(x), b.result.timing.batch_size, meter, synchronize=sync)
