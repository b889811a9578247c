"""``python -m cluster run SWEEP --out OUT``: a Ray-mode run without the installed console script.

This is what a job submitted by ``trialgrid job submit`` executes on the head, so the
cluster needs the project directory and trialgrid's dependencies, not an install of
trialgrid itself.
"""

import sys

from cluster.cli import job_main

sys.exit(job_main())
