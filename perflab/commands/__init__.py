"""CLI subcommands; each module has ``register(subparsers)`` (see perflab.cli)."""
