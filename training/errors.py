"""The one exception the training scripts turn into `error: …` and exit code 2 (stdlib only)."""


class TrainingError(Exception):
    """Bad input the user can fix: the message names what is wrong and what is allowed."""
