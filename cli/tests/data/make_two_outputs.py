"""Writes two_outputs.onnx: input `x` float32 [batch, 4], two outputs of width 10
(`logits` and `embedding`), so `cocktail zoo add` must be told which one holds the
logits. Run with any Python that has `onnx` (e.g. the imagenet branch's venv)."""
import onnx
from onnx import TensorProto, helper

w1 = helper.make_tensor("w1", TensorProto.FLOAT, [4, 10], [0.1 * i for i in range(40)])
w2 = helper.make_tensor("w2", TensorProto.FLOAT, [4, 10], [-0.1 * i for i in range(40)])
graph = helper.make_graph(
    [
        helper.make_node("MatMul", ["x", "w1"], ["logits"]),
        helper.make_node("MatMul", ["x", "w2"], ["embedding"]),
    ],
    "two_outputs",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10]),
        helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 10]),
    ],
    initializer=[w1, w2],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, "two_outputs.onnx")
