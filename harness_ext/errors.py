"""The one error type users see for bad settings or missing files."""


class DriftUsageError(SystemExit):
    """A bad option or a missing file, with a one-line message that says what to do.

    It derives from ``SystemExit`` so that a command (``lm_eval``, ``drift-eval``) stops with
    that single line on stderr and exit status 1, without a traceback. Python callers can
    catch it by name.
    """

    def __init__(self, message: str):
        super().__init__(f"error: {message}")
        self.message = message

    def __str__(self) -> str:
        return self.message
