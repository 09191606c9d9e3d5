"""One module per subcommand; each defines ``register(subparsers, parent)``, which adds its
parser with ``parents=[parent]`` (the common options; the single-command stand-in of
:func:`opshift.cli.command_parser` passes None and adds them itself)."""
