"""The one exception type the CLI turns into a clean `error: …` message and exit code 2."""


class AzdlError(Exception):
    """A problem the user can fix: the message names what is wrong and what is allowed."""
