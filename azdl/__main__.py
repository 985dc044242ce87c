from azdl.cli import main

raise SystemExit(main())
