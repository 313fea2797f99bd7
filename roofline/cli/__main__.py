"""`python -m roofline.cli`: the console script."""

import sys

from roofline.cli import main

sys.exit(main())
