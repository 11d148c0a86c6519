"""``python -m workbench.cli ...``: what the ``workbench`` script runs."""

import sys

from workbench.cli import main

sys.exit(main())
