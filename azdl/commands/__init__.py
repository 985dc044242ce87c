"""One module per `azdl` subcommand."""
