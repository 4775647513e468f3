"""`python -m eatt.cli ...`: the `eatt` command."""

import sys

from eatt.cli import main

sys.exit(main())
