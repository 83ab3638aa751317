"""``recommend`` on a language model (``--model tiny-lm|smollm2-135m|hf:DIR --dataset
text[:PATH]``): every cell of the grid the technique flags name (``DEFAULT_GRID`` without one)
under each ``--runtime`` mode, measured whole, the candidates chosen on the search windows and
certified on the certify windows (``benchmarks.recommend.lm_pipeline``). The certificate and
its table on stdout, the run in the store (kind ``lm``, its recommendation beside it) and as
JSON when asked: ``lm_certificate.recompute`` redoes the certificate from that document."""

from __future__ import annotations

import json
import sys

from benchmarks.cli.outputs import EXIT_OK, check_writable, write_output

# The image search's flags a language model's recommend refuses, with what they were given as.
IMAGE_ONLY = (("executor", "local", "--executor ray"), ("weights", None, "--weights"),
              ("checkpoint", None, "--checkpoint"), ("fp32", "ieee", "--fp32"))


def cmd_recommend_lm(args, request) -> int:
    from benchmarks.cli.parser import config_from_args
    from benchmarks.cli.run import technique_choices
    from benchmarks.recommend.lm_pipeline import DEFAULT_GRID, check_request
    from benchmarks.spec.lm import LMOptions
    from benchmarks.spec.sweep import SweepSpec
    check_request(request)
    for name, default, flag in IMAGE_ONLY:
        if getattr(args, name, default) != default:
            raise ValueError(f"a language model's recommend takes no {flag}")
    choices, enabled = technique_choices(args)
    if ("prune", "finetune_epochs") in choices:
        raise ValueError("a language model's pruning does not fine-tune: drop "
                         "--finetune-epochs (Wanda reads calibration text instead)")
    if not enabled:  # no technique named: each language-model technique's grid
        choices = dict(DEFAULT_GRID)
        enabled = {technique for technique, _ in DEFAULT_GRID}
    spec = SweepSpec.from_choices(
        choices, enabled, model=args.model, dataset=args.dataset, device=args.device,
        seed=args.seed, threads=args.threads, timing_rounds=args.timing_rounds,
        runtimes=tuple(args.runtime))
    options = config_from_args(LMOptions, args)
    check_writable(args.json_file, "--json")

    from benchmarks.recommend.lm_pipeline import LMRecommender
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.recommendation import table_text
    from benchmarks.views.lm import lm_recommend_lines
    from benchmarks.store.database import ResultsStore
    recommender = LMRecommender(request, spec, options)  # model and text: refused in one line
    say = (lambda _line: None) if args.quiet else \
        (lambda line: print(f"[lm] {line}", file=sys.stderr, flush=True))
    say(f"grid: {len(spec.variants)} variants x {', '.join(spec.runtimes)}; split: "
        f"{recommender.split.card()}")
    store = ResultsStore(args.store)
    fields = recommender.run_fields()
    with store.record(**fields) as recorder:
        block, records = recommender.run(recorder, say)
        run_id = recorder.run_id
    record = Recommended.from_dict(block)
    print("\n".join(lm_recommend_lines(record)))
    print(table_text(record))
    print(f"run {run_id} stored in {store.path}", file=sys.stderr)
    if args.json_file:
        document = {"kind": "lm", "run_id": run_id, "model": spec.model,
                    "dataset": spec.dataset, "device": "cpu", "spec": fields["spec"],
                    "environment": fields["environment"], "variants": records,
                    "recommendation": block}
        write_output(args.json_file, json.dumps(document, indent=2, default=str))
    return EXIT_OK
