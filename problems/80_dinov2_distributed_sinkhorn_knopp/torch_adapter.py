"""Problem 80: calls PKB's reference/80_dinov2_distributed_sinkhorn_knopp.py solution() on pkb's inputs."""
UPSTREAM = "reference/80_dinov2_distributed_sinkhorn_knopp.py"

TEACHER_TEMP = 0.07  # PKB's create_input_tensor passes teacher_temp = 0.07


# PKB: solution(teacher_output fp32 [B, K], teacher_temp, n_masked_patches_tensor int64 [1],
# n_iterations 3, group None = WORLD). pkb's teacher_output has std 0.15 instead of PKB's 0.01 (spec.toml).
def make_args(inputs, ctx):
    return (inputs["teacher_output"], TEACHER_TEMP, inputs["n_masked_patches_tensor"], int(ctx.vars["iters"]), None)


def to_outputs(result, inputs, ctx):
    return {"q": result}
