"""Subcommands of `fuseview`. Each module defines NAME (optional), HELP, add_arguments(p) and run(args)."""
