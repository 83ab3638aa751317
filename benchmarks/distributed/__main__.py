"""``python -m benchmarks.distributed`` = ``compression-bench distributed``: one parser, one
error boundary (an entry script, not a module anything imports: pyproject's layer contract
lets it reach up to the CLI)."""

import sys

from benchmarks.cli.main import main

sys.exit(main(["distributed", *sys.argv[1:]]))
