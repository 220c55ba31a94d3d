"""``python3 -m accmon_dashboard``: the same as the ``accmon-dashboard`` command."""

from .cli import main

raise SystemExit(main())
