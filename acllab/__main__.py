"""``python -m acllab`` is the ``acllab`` command."""

import sys

from .cli import main

sys.exit(main())
