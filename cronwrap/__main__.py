from cronwrap.cli import main

raise SystemExit(main())
