"""Problem 33: calls PKB's reference/33_ulysses_all_to_all_tensor_primitive.py solution() on pkb's inputs."""
UPSTREAM = "reference/33_ulysses_all_to_all_tensor_primitive.py"


def make_args(inputs, ctx):
    # PKB: solution(x, scatter_dim=0, gather_dim=1, group=None (WORLD)).
    return (inputs["x"], 0, 1, None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
