"""Errors tessel raises at the user: always located in the user's source."""
import linecache


class CompilationError(Exception):
    """A kernel could not be compiled. Names the file, line and column and shows the line.

    ``str(error)`` is ``file:line:col: error: message``, then the source line and a caret.

    Attributes:
        message: the bare reason.
        filename: the file of the user's code it points at (None if unknown).
        lineno: the line, 1-based.
        col: the column the caret points at, 1-based.
        source_line: the text of that line.
    """

    def __init__(self, message, filename=None, lineno=None, col=None, source_line=None):
        self.message = message
        self.filename = filename
        self.lineno = lineno
        self.col = col
        if source_line is None and filename and lineno:
            source_line = linecache.getline(filename, lineno).rstrip("\n")
        self.source_line = source_line
        super().__init__(self._format())

    def _format(self):
        if not self.filename:
            return f"error: {self.message}"
        text = f"{self.filename}:{self.lineno}:{self.col}: error: {self.message}"
        if self.source_line:
            caret = " " * (max(self.col, 1) - 1) + "^"
            text += f"\n{self.source_line}\n{caret}"
        return text


class KernelRuntimeError(RuntimeError):
    """The interpreter stopped a kernel: an out-of-buffer access, a division by zero, the step
    limit (``TESSEL_MAX_STEPS``), ... The message names the op's location."""
