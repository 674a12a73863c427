"""A model emitted as one C program (morello_asp/onnx/emit_c.py, standalone) built by its
own gcc line and run on input files: what the tests of emitted models compare."""

from __future__ import annotations

import os
import subprocess

import numpy as np


def run_executable(mc, tmp_path, feed) -> list[np.ndarray]:
    """mc's outputs on the inputs `feed` (name -> array), through the built executable."""
    c_file, w_file = mc.save(tmp_path / "model.c")
    exe = tmp_path / "model"
    r = subprocess.run([x.format(c=c_file, exe=exe) for x in mc.build], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ins = []
    for name, shape in mc.inputs:
        f = tmp_path / f"in_{name}.bin"
        feed[name].astype(np.float32).reshape(shape).tofile(f)
        ins.append(str(f))
    outs = [str(tmp_path / f"out_{name}.bin") for name, _ in mc.outputs]
    env = {**os.environ, "MORELLO_ASP_REPS": "2"}
    r = subprocess.run([str(exe), str(w_file), *ins, *outs], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "time: " in r.stderr  # the run timed itself
    return [np.fromfile(f, np.float32).reshape(shape) for f, (_, shape) in zip(outs, mc.outputs)]
