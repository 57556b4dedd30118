"""The one exception type whose message is meant for the user."""


class FuseviewError(Exception):
    """A problem with the user's input, described in one line they can act on."""
