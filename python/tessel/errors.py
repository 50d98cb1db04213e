"""Errors tessel raises at the user: always located in the user's source."""
import linecache


class CompilationError(Exception):
    """A kernel could not be compiled. Names the file, line and column and shows the line.

    Attributes: ``message`` (the bare reason), ``filename``, ``lineno`` (1-based), ``col``
    (1-based, the column the caret points at), ``source_line``.
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
    """The interpreter stopped a kernel (an out-of-buffer access, the step limit, ...)."""
