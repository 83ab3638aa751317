"""``list`` (what can be benchmarked: models, catalogues, data sets, techniques and every
setting's metadata, the job kinds the queue takes), ``history`` (the stored runs) and
``jobs`` (the dashboard's queue)."""

from __future__ import annotations

import json

from benchmarks.cli.outputs import EXIT_OK


def _techniques() -> dict:
    from optimizers import registry
    techniques = {}
    for t in registry.techniques():
        techniques[t.name] = {
            "description": t.description, "order": t.order, "switch": t.switch_flag,
            "families": list(t.families),
            "control": None if t.control is None else {
                "name": t.control.name, "uses": list(t.control.uses),
                "description": t.control.description},
            "settings": {f: {"flag": t.flag(f), "help": m.help, "accepted": m.accepted(),
                             "default": d, "sweep": m.sweep,
                             **({"choices": list(m.choices)} if m.choices else {}),
                             **({"lm_choices": list(m.lm_choices)} if m.lm_choices else {}),
                             **({"low": m.low, "high": m.high} if m.kind in ("int", "float")
                                else {})}
                         for f, m, d in t.fields() if not m.hidden}}
    return techniques


def _precisions() -> dict:
    from benchmarks.measure import precisions
    return {p.name: {"bytes_per_element": p.bytes, "devices": list(p.devices),
                     "deployable": p.deployable, "description": p.description}
            for p in precisions.precisions()}


def list_info() -> dict:
    """Models, data sets and techniques with every setting's metadata (``list --json``)."""
    from benchmarks.spec.datasets import TEXT_ENTRY, dataset_entries
    from benchmarks.zoo.catalogue import SOURCES, names
    from benchmarks.zoo.lm import lm_entry, lm_names
    from benchmarks.zoo.models import list_models, model_entry
    from optimizers import registry
    return {
        "models": {n: {"family": model_entry(n).family, "description": model_entry(n).description,
                       "student": model_entry(n).student} for n in list_models()},
        "catalogues": {source: names(source) for source in SOURCES},
        "datasets": [entry.menu for entry in dataset_entries()],
        "dataset_entries": {entry.menu: entry.to_dict() for entry in dataset_entries()},
        "language_models": {**{n: lm_entry(n).description for n in lm_names()},
                            "hf:DIR": "a causal LM save_pretrained wrote to a local folder "
                                      "(safetensors weights, a fast tokenizer)"},
        "text_datasets": {"text": "Python's own help topics (pydoc_data), embedded",
                          f"{TEXT_ENTRY.name}:{TEXT_ENTRY.argument}":
                              "your text: a .txt file or a folder of them"},
        "techniques": _techniques(),
        "order": list(registry.names()),
        "job_kinds": {k.name: k.description for k in job_kinds()},
        "precisions": _precisions(),
    }


def job_kinds():
    """The registered job kinds (``benchmarks.service.kinds``: the product's and those
    COMPRESSION_BENCH_KIND_MODULES adds)."""
    from benchmarks.service import kinds
    return kinds.kinds()


def cmd_list(args) -> int:
    info = list_info()
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    print("models:")
    for name, m in info["models"].items():
        student = f" (student: {m['student']})" if m["student"] else ""
        print(f"  {name:<26} {m['description']}{student}")
    for source, listed in info["catalogues"].items():
        print(f"  {source + ':NAME':<26} {len(listed)} models of {source}'s registry, e.g. "
              f"{', '.join(listed[:3])} (list --json names them all)")
    print("  FILE.py:FACTORY            your own: FACTORY(num_classes, in_channels) -> nn.Module")
    print("language models (on a text data set):")
    for name, description in info["language_models"].items():
        print(f"  {name:<26} {description}")
    print("datasets:")
    for name, d in info["dataset_entries"].items():
        print(f"  {name:<26} {d['description']}")
    for name, description in info["text_datasets"].items():
        print(f"  {name:<26} {description} (a language model's)")
    print(f"techniques (combined in the order {' -> '.join(info['order'])}):")
    for name, t in info["techniques"].items():
        print(f"  {name:<8} {t['switch']:<10} {t['description']}")
        for field, s in t["settings"].items():
            sweep = ", sweepable" if s["sweep"] else ""
            print(f"           {s['flag']:<22} {s['accepted']} (default {s['default']}{sweep})")
        if t["control"]:
            print(f"           control: {t['control']['name']}: {t['control']['description']}")
    print("job kinds (what the dashboard's queue runs; `jobs` lists the queue):")
    for name, description in info["job_kinds"].items():
        print(f"  {name:<26} {description}")
    print("precisions (the roofline's roofs; bytes per element, devices):")
    for name, p in info["precisions"].items():
        print(f"  {name:<8} {p['bytes_per_element']:<4g} {', '.join(p['devices']):<10} "
              f"{p['description']}")
    return EXIT_OK


def cmd_history(args) -> int:
    from benchmarks.report.document import RunReport
    from benchmarks.run.estimate import estimate_error, shown_kind
    from benchmarks.store.database import ResultsStore
    store = ResultsStore(args.store)
    runs = store.runs(limit=args.limit)
    if args.json:
        print(json.dumps([RunReport.from_stored(r).summary() for r in runs], indent=2,
                         default=str))
        return EXIT_OK
    if not runs:
        print(f"no runs in {store.path}")
        return EXIT_OK
    for run in runs:
        ok = sum(1 for v in run["variants"] if not v.get("error"))
        print(f"{run['run_id']}  {run['created_at'][:19]}  {shown_kind(run):<11} "
              f"{run['model']:<20} {run['dataset']:<12} {run['device'] or '-':<7} "
              f"{run['status']:<11} {ok}/{len(run['variants'])} variants ok, "
              f"{estimate_error(run)}"
              + (f", {len(run['unreadable'])} stored row(s) unreadable (see below)"
                 if run.get("unreadable") else ""))
    return EXIT_OK


def cmd_jobs(args) -> int:
    """The queue's jobs, newest first: id, kind, status, when, and the error of one that
    failed. A kind not registered in this process (another server version's job) is marked,
    not refused: the listing shows the queue as it is."""
    from benchmarks.service import kinds
    from benchmarks.service.queue import JobQueue
    queue = JobQueue(args.store)
    jobs = queue.jobs(limit=args.limit)
    known = set(kinds.names())
    if args.json:
        print(json.dumps([{"job_id": j.job_id, "kind": j.kind, "registered": j.kind in known,
                           "status": j.status, "device": j.device,
                           "submitted_at": j.submitted_at, "finished_at": j.finished_at,
                           "run_id": j.run_id, "error": j.error} for j in jobs], indent=2))
        return EXIT_OK
    if not jobs:
        print(f"no jobs in {queue.path}")
        return EXIT_OK
    for j in jobs:
        kind = j.kind if j.kind in known else f"{j.kind} (not registered here)"
        print(f"{j.job_id}  {(j.submitted_at or '')[:19]}  {kind:<12} {j.device:<7} "
              f"{j.status:<11}" + (f" {j.error}" if j.error else ""))
    return EXIT_OK
