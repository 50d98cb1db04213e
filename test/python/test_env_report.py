"""`python -m tessel env`: the report a bug report needs, as text and JSON, with the CUDA
routes that wait for their GPU check."""
import json
import os
import subprocess
import sys

import dsl_helpers  # (puts the build's package on the path)
from tessel import env_report, serving_checks


def test_env_command_prints_every_field():
    env = dict(os.environ, PYTHONPATH=str(dsl_helpers.BUILD / "python"),
               TESSEL_BUILD_DIR=str(dsl_helpers.BUILD))
    r = subprocess.run([sys.executable, "-m", "tessel", "env", "--json"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert list(got) == list(env_report.report())
    assert got["tessel"].startswith("0.") and got["LLVM"][:2].isdigit()
    text = subprocess.run([sys.executable, "-m", "tessel", "env"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert text.returncode == 0 and "CUDA devices:" in text.stdout


def test_switches_waiting_for_a_gpu_check_are_listed(monkeypatch):
    monkeypatch.setattr(serving_checks, "PACKED_SEQUSED_CUDA", False)
    assert "serving_checks.PACKED_SEQUSED_CUDA" in env_report.report()[
        "CUDA routes off until their GPU check"]
    monkeypatch.setattr(serving_checks, "PACKED_SEQUSED_CUDA", True)
    assert "serving_checks.PACKED_SEQUSED_CUDA" not in env_report.report()[
        "CUDA routes off until their GPU check"]
