"""The `skiff` command and its subcommands."""
