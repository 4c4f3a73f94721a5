"""Problem 45: calls PKB's reference/45_reducescatter_fused_rmsnorm.py solution() on pkb's inputs."""
UPSTREAM = "reference/45_reducescatter_fused_rmsnorm.py"

EPS = 1e-5  # PKB's create_input_tensor passes eps = 1e-5


# PKB's create_input_tensor returns (rs_input [W R H] rank-specific, gamma [H] drawn with rank 0's
# seed, 1e-5). pkb's gamma is `shared` (the same on every rank) and rs_input is on a grid; the reference
# takes any values. The reference infers R from the input's length and gamma's.
def make_args(inputs, ctx):
    return (inputs["rs_input_1d"], inputs["gamma"], EPS)


def to_outputs(result, inputs, ctx):
    return {"out": result}
