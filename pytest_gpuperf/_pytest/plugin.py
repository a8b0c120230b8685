"""The entry point's name before 0.2: this module *is* ``pytest_gpuperf.plugin.entry``, so that pytest registers the
plugin once whichever name loads it. Kept for one release."""

from __future__ import annotations

import sys

from ..plugin import entry

sys.modules[__name__] = entry
