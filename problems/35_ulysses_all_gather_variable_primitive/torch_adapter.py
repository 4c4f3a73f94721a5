"""Problem 35: calls PKB's reference/35_ulysses_all_gather_variable_primitive.py solution() on pkb's inputs."""
UPSTREAM = "reference/35_ulysses_all_gather_variable_primitive.py"


def make_args(inputs, ctx):
    # PKB: solution(x, gather_dim=0, group=None (WORLD)); x has this rank's row count.
    return (inputs["x"], 0, None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
