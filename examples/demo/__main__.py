"""``python -m examples.demo``: the same call on each stack; see ``examples/demo/__init__.py``."""

import sys

from . import main, parse_args, route_logs

# The libraries' own logs would write over the live view.
route_logs(parse_args(sys.argv[1:]).out / "demo.log")
sys.exit(main())
