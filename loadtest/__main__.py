from loadtest.commands.cli import main

raise SystemExit(main())
