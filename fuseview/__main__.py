from fuseview.cli import main

raise SystemExit(main())
