"""Problem 86: calls PKB's reference/86_tp_muon_orthogonalization.py solution() on pkb's inputs."""
UPSTREAM = "reference/86_tp_muon_orthogonalization.py"


# PKB: solution(x bf16 [R, C/W], steps 5, coefficient_type "quintic", partition_dim 1, group None =
# WORLD). PyTorch's default (torch.backends.cuda.matmul.allow_tf32 = False) makes its fp32 matmuls true
# FP32, as pkb's baseline; a PyTorch run with TF32 enabled would not agree within the tolerance.
def make_args(inputs, ctx):
    return (inputs["x"], int(ctx.vars["steps"]), "quintic", 1, None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
