"""``python -m estimator report|predict|list|fit`` (see estimator.app.cli)."""

import sys

from estimator.app.cli import main

sys.exit(main())
