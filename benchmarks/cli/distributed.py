"""``distributed``: the data-parallel training benchmark. Its flags are
``DistributedConfig``'s fields (``parser.config_flags``) and the config checks them; the
launcher refuses what the machine cannot host before the store records anything."""

from __future__ import annotations

import json
import sys

from benchmarks.cli.outputs import EXIT_OK, EXIT_VARIANT_FAILED, check_writable, write_output
from benchmarks.cli.parser import config_from_args


def cmd_distributed(args) -> int:
    from benchmarks.distributed.record import ScalingRun, scaling_table
    from benchmarks.spec.distributed import DistributedConfig
    from benchmarks.views.scaling import (interval_text, noise_warnings, throughput_interval,
                                          within_noise)
    config = config_from_args(DistributedConfig, args)
    check_writable(args.json_file, "--json")
    from benchmarks.distributed.launcher import distributed_environment, prepare_distributed
    from benchmarks.report.document import RunReport
    # Ray's absence, capacity, model, data and memory: refused before the store records.
    prepared = prepare_distributed(config)
    for warning in prepared.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    store = None
    if not args.no_store:
        from benchmarks.store.database import ResultsStore
        store = ResultsStore(args.store)
    environment = distributed_environment(config)
    recorder = None if store is None else store.record(
        model=config.model, dataset=config.dataset, device=prepared.device,
        spec=config.to_dict(), environment=environment, kind="distributed")

    def report(done, total, run):
        if recorder is not None:
            recorder.add(dict(run))
        status = "ok" if run["error"] is None else f"FAILED: {run['error']}"
        tput = f"{run['throughput']:.0f} samples/s" if run["throughput"] else "-"
        interval = interval_text(throughput_interval(ScalingRun.from_dict(run)))
        tput += f" (95% CI {interval})" if interval else ""
        print(f"[{done}/{total}] {run['name']}: {tput}, {run['wall_s']:.1f} s, {status}",
              file=sys.stderr)

    if recorder is not None:
        with recorder:
            runs = prepared.run(on_progress=report)
    else:
        runs = prepared.run(on_progress=report)
    document = RunReport(kind="distributed", environment=environment, variants=runs)
    if args.json_file:
        write_output(args.json_file, json.dumps(document.document(), indent=2))
    print(document.table())
    # Which differences are noise: one-worker runs apart beyond their intervals (their
    # efficiencies carry it), comparisons whose intervals overlap.
    table = scaling_table(runs)
    for line in noise_warnings(table):
        print(f"warning: {line}")
    for line in within_noise(table):
        print(f"within noise: {line}")
    return EXIT_VARIANT_FAILED if any(r["error"] is not None for r in runs) else EXIT_OK
