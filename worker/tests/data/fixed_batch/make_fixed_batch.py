"""Writes fixed_batch.onnx: input `x` float32 [1, 4] (a batch axis fixed at 1, as
`torch.onnx.export` writes without `dynamic_axes`), output `logits` [1, 3] = x @ w with
w[i][j] = i - j. Run with any Python that has `onnx`."""
import onnx
from onnx import TensorProto, helper

w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [float(i - j) for i in range(4) for j in range(3)])
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["logits"])],
    "fixed_batch",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3])],
    initializer=[w],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, "fixed_batch.onnx")
