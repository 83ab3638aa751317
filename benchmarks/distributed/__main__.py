"""``python -m benchmarks.distributed`` = ``python -m benchmarks distributed``."""

import sys

from benchmarks.distributed.launcher import main

sys.exit(main(sys.argv[1:]))
