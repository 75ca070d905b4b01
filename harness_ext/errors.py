"""The error types users see for bad settings, missing files and damaged files."""

#: exit status of every ``drift-eval`` command for unusable input (and for nothing else)
USAGE_EXIT = 2


class DriftUsageError(SystemExit):
    """A bad option or a missing file, with a one-line message that says what to do.

    ``drift-eval`` prints it as one line and exits ``USAGE_EXIT`` (2); the pytest plugin
    reports it as an error. It derives from ``SystemExit`` so that other commands that
    reach it (``lm_eval`` with the plugin's tasks) stop with that single line on stderr
    instead of a traceback. Python callers can catch it by name.
    """

    def __init__(self, message: str):
        message = " ".join(str(message).split())  # one line, whatever the parts held
        super().__init__(f"error: {message}")
        self.message = message

    def __str__(self) -> str:
        return self.message


class DamagedFile(DriftUsageError):
    """A file that exists but cannot be read as what it should be (cut short, not UTF-8,
    not the JSON shape expected, a folder in its place). ``path`` names it, so that a
    caller that owns the file (the sweep) can move it aside and write it again."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path
