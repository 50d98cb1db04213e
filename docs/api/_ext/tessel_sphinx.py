"""Sphinx extension for tessel's API reference.

- ``.. command-help:: TOOL [SUBCOMMAND ...]`` runs ``TOOL ... --help`` at doc-build time and
  shows its output, so the reference cannot go stale: TOOL is a binary of the build tree
  (tesselc, tessel-opt, tessel-run) or ``tessel`` (``python -m tessel``). ``:start-at:`` and
  ``:end-before:`` keep the lines from the first one holding a text to the first one after it
  holding another (tessel-opt's help is mostly LLVM's generic options). A tool that is missing
  or fails is a warning, so the -W build fails.
- The tile language's builtins (tessel.language._Builtin objects: stubs whose signature and
  docstring are the reference) are documented as functions by automodule.
"""
import os
import pathlib
import subprocess
import sys

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.ext.autodoc import FunctionDocumenter
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

_ROOT = pathlib.Path(__file__).resolve().parents[3]


def _build_dir():
    return pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", _ROOT / "build"))


class CommandHelp(SphinxDirective):
    required_arguments = 1
    optional_arguments = 8
    option_spec = {"start-at": directives.unchanged, "end-before": directives.unchanged}

    def run(self):
        tool, *rest = self.arguments
        if tool == "tessel":
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_build_dir() / "python"),
                                                               env.get("PYTHONPATH")]))
            cmd, shown = [sys.executable, "-m", "tessel", *rest, "--help"], "python -m tessel"
        else:
            env = None
            cmd, shown = [str(_build_dir() / "bin" / tool), *rest, "--help"], tool
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        except OSError as err:
            logger.warning(f"command-help: cannot run {tool}: {err} (build tessel first)",
                           location=self.get_location())
            return []
        if r.returncode != 0 or not r.stdout.strip():
            logger.warning(f"command-help: `{' '.join(cmd)}` exited {r.returncode}: "
                           f"{r.stderr.strip()[-300:]}", location=self.get_location())
            return []
        lines = r.stdout.rstrip().splitlines()
        start, end = self.options.get("start-at"), self.options.get("end-before")
        if start:
            hits = [i for i, line in enumerate(lines) if start in line]
            if not hits:
                logger.warning(f"command-help: no line of {tool} --help holds {start!r}",
                               location=self.get_location())
                return []
            lines = lines[hits[0]:]
        if end:
            hits = [i for i, line in enumerate(lines) if end in line and i > 0]
            lines = lines[:hits[0]] if hits else lines
        text = f"$ {shown} {' '.join(rest + ['--help'])}\n" + "\n".join(lines)
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


class BuiltinDocumenter(FunctionDocumenter):
    """Documents a tile-language builtin (a marker object with a stub's signature) as a
    function."""

    objtype = "tlbuiltin"
    directivetype = "function"
    priority = FunctionDocumenter.priority + 10

    @classmethod
    def can_document_member(cls, member, membername, isattr, parent):
        from tessel.language import _Builtin
        return isinstance(member, _Builtin)


def setup(app):
    app.add_directive("command-help", CommandHelp)
    app.add_autodocumenter(BuiltinDocumenter)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
