"""Problem 44: calls PKB's reference/44_quantized_grad_allreduce.py solution() on pkb's inputs."""
UPSTREAM = "reference/44_quantized_grad_allreduce.py"


# PKB: solution(flat_grad [max(M N, 64 W)], block_size = min(128, max(16, N // 4))).
def make_args(inputs, ctx):
    return (inputs["flat_grad"], int(ctx.vars["BS"]))


def to_outputs(result, inputs, ctx):
    return {"out": result}
