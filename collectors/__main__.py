"""`python -m profboard.collectors WORKLOAD ...`: what torchrun starts on each rank."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
