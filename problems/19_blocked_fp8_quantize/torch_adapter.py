"""Problem 19: calls PKB's reference/19_blocked_fp8_quantize.py solution() on pkb's inputs."""
UPSTREAM = "reference/19_blocked_fp8_quantize.py"  # imports triton (its quantizer is a Triton kernel)

BLOCK_SIZE = 128  # PKB's create_input_tensor passes block_size = 128


# PKB: solution(local_tensor [M, N] in D, block_size).
def make_args(inputs, ctx):
    return (inputs["local_tensor"], BLOCK_SIZE)


# PKB returns (y_global float8_e4m3fn [W M, N], s_global fp32 [W M, N / 128]).
def to_outputs(result, inputs, ctx):
    y_global, s_global = result
    return {"y_global": y_global, "s_global": s_global}
