"""Allow ``python -m simreal_ros ...`` as a synonym of the ``simreal`` command."""

from simreal_ros.cli import main

raise SystemExit(main())
