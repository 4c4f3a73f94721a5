"""Problem 15: calls PKB's reference/15_combined_sharded_gemms.py solution() on pkb's inputs."""
UPSTREAM = "reference/15_combined_sharded_gemms.py"


# PKB's create_input_tensor returns (x_local [M, H/W], W1 [H, F], W2 [F, H]), all rank-specific: pkb's
# inputs are the same tensors (pkb scales W1 and W2 with the size class; at PKB's shapes they are
# N(0, 1) as in PKB).
def make_args(inputs, ctx):
    return (inputs["x_local"], inputs["W1"], inputs["W2"])


def to_outputs(result, inputs, ctx):
    return {"y_local": result}
