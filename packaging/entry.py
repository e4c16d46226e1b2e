"""The self-contained build's entry point (PyInstaller's script): cronwrap's console script."""

import sys

from cronwrap.cli import main

sys.exit(main())
