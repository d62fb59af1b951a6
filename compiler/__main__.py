"""`python -m compiler` runs the obc command line."""

from .cli.main import main

raise SystemExit(main())
