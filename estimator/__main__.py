"""``python -m estimator report|predict|list|fit`` (see estimator.cli)."""

import sys

from estimator.cli import main

sys.exit(main())
