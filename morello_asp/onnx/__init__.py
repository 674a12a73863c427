"""ONNX models in (docs/onnx.md): `InferenceSession(model, target=..., db=...)` imports
an ONNX graph (importer.py, the op table in ops.py) into a plan of synthesized programs
and views (plan.py), and runs it with onnxruntime's interface (session.py);
`model_specs` lists the specs it searches, for `precompute` (specs.py). Needs the
onnx extra (`pip install morello-asp[onnx]`: onnx, and onnxruntime to check against)."""

from morello_asp.onnx.importer import import_model
from morello_asp.onnx.plan import ModelError, Plan
from morello_asp.onnx.session import InferenceSession, NodeArg
from morello_asp.onnx.specs import model_specs

__all__ = ["InferenceSession", "ModelError", "NodeArg", "Plan", "import_model", "model_specs"]
