import sys

from benchmarks.cli.main import main

sys.exit(main())
