"""The exceptions the CLI turns into one clean `error: …` line, each with its exit code.

Exit codes shared by every command (docs/cli.md lists them): 2 bad input, 4 not signed in to
Azure, 5 an Azure endpoint that could not be reached. 0, 1 and 3 keep each command's own meaning
(`azdl diff` uses 3 for changes that need a reviewer).
"""


class AzdlError(Exception):
    """A problem the user can fix: the message names what is wrong and what is allowed."""

    exit_code = 2


class NotSignedIn(AzdlError):
    """No usable Azure credential: the message says what to run (`az login`, or which managed
    identity failed)."""

    exit_code = 4


class Unreachable(AzdlError):
    """An Azure endpoint did not answer within the bounded time; the message names it."""

    exit_code = 5
