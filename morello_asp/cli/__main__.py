"""`python -m morello_asp.cli`: the `morello-asp` command."""

import sys

from morello_asp.cli.main import main

sys.exit(main())
