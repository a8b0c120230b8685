"""``python -m pytest_gpuperf``: the same as the ``pytest-gpuperf`` command."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
