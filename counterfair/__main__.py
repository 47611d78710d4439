"""``python -m counterfair``: the command line (:func:`counterfair.cli.main`)."""

from counterfair.cli import main

raise SystemExit(main())
