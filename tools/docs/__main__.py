from tools.docs.generate import main

raise SystemExit(main())
