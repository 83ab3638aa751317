"""``run`` on a language model (``--model tiny-lm|smollm2-135m|hf:DIR --dataset text[:PATH]``):
the same flags name the techniques (``--int8 weight-only,dynamic --int4 128 --prune 0.5
--prune-method wanda --amp bf16``) and the runtime modes (``--runtime eager,compile``); the
table of cells on stdout, progress on stderr, the run in the store (kind ``lm``) and as JSON
when asked."""

from __future__ import annotations

import json
import sys

from benchmarks.cli.outputs import EXIT_OK, EXIT_VARIANT_FAILED, check_writable, write_output


def wants_lm(spec) -> bool:
    """Whether ``run`` takes the language-model path: its model is one, or its data is text
    (where the other half is then refused in one line)."""
    from benchmarks.spec.datasets import is_text_dataset
    from benchmarks.zoo.lm import is_language_model
    return is_language_model(spec.model) or is_text_dataset(spec.dataset)


def cmd_run_lm(args, spec, choices: dict) -> int:
    from benchmarks.cli.parser import config_from_args
    from benchmarks.run.lm_runner import LMSweep, check_lm_spec
    from benchmarks.spec.lm import LMOptions
    if ("prune", "finetune_epochs") in choices:
        raise ValueError("a language model's pruning does not fine-tune: drop "
                         "--finetune-epochs (Wanda reads calibration text instead)")
    if args.executor == "ray" or args.schedule:
        raise ValueError("a language model's run takes no --executor ray or --schedule")
    options = config_from_args(LMOptions, args)
    check_lm_spec(spec)
    check_writable(args.json_file, "--json")
    check_writable(args.csv_file, "--csv")
    if args.csv_file:
        raise ValueError("a language model's run writes --json; --csv is for image sweeps")
    sweep = LMSweep(spec, options)  # the model and text: a bad file refused before the store

    from benchmarks.views.lm import lm_answer, lm_table
    from benchmarks.store.database import ResultsStore
    store = ResultsStore(args.store)
    spec_record = {**spec.to_dict(), "lm": options.to_dict()}
    say = (lambda _line: None) if args.quiet else \
        (lambda line: print(f"[lm] {line}", file=sys.stderr, flush=True))
    with store.record(model=spec.model, dataset=spec.dataset, device="cpu", spec=spec_record,
                      environment=sweep.environment, kind="lm") as recorder:
        variants = sweep.run(say, on_record=lambda position, v: recorder.add(v.to_dict(),
                                                                           position))
        run_id = recorder.run_id
    records = [v.to_dict() for v in variants]
    from benchmarks.measure.cores import shared_notes
    for note in shared_notes((c.get("timing") or {}).get("pinning")
                             for v in records for c in v["cells"]):
        print(f"warning: {note}", file=sys.stderr)
    answer = lm_answer(records)
    print(lm_table(records))
    print(f"answer: {answer.line}")
    print(f"run {run_id} stored in {store.path}", file=sys.stderr)
    if args.json_file:
        document = {"kind": "lm", "run_id": run_id, "model": spec.model,
                    "dataset": spec.dataset, "device": "cpu", "spec": spec_record,
                    "environment": sweep.environment, "answer": answer.to_dict(),
                    "variants": records}
        write_output(args.json_file, json.dumps(document, indent=2, default=str))
    return EXIT_OK if all(v.ok and all(c.get("ok") for c in v.cells) for v in variants) \
        else EXIT_VARIANT_FAILED
