"""Problem 20: calls PKB's reference/20_blocked_fp8_dequantize.py solution() on pkb's inputs."""
UPSTREAM = "reference/20_blocked_fp8_dequantize.py"


# PKB: solution(local_y [W, M, N], local_s [W, M N / 128], block_size = 128). The reference's kernel is
# Triton, so this needs triton installed next to PyTorch.
def make_args(inputs, ctx):
    return (inputs["local_y"], inputs["local_s"], int(ctx.vars["BS"]))


def to_outputs(result, inputs, ctx):
    return {"out": result}
