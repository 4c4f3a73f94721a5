"""Problem 34: calls PKB's reference/34_ulysses_all_gather_into_tensor_primitive.py solution() on pkb's inputs."""
UPSTREAM = "reference/34_ulysses_all_gather_into_tensor_primitive.py"


def make_args(inputs, ctx):
    # PKB: solution(x, group=None (WORLD)).
    return (inputs["x"], None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
