"""``python3 -m accmon``: see :mod:`accmon.cli`."""

import sys

from .cli import main

sys.exit(main())
