"""``python -m pubsim``: the ``pubsim`` command."""

import sys

from .cli import main

sys.exit(main())
