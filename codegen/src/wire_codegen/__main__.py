"""`python -m wire_codegen`."""

import sys

from wire_codegen.cli import main

sys.exit(main())
