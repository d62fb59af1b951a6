"""`python -m compiler` runs the obc command line."""

from .cli import main

raise SystemExit(main())
