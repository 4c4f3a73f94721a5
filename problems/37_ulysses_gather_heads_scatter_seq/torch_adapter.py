"""Problem 37: calls PKB's reference/37_ulysses_gather_heads_scatter_seq.py solution() on pkb's inputs."""
UPSTREAM = "reference/37_ulysses_gather_heads_scatter_seq.py"


def make_args(inputs, ctx):
    # PKB: solution(x, seq_dim=1, head_dim=2, group=None (WORLD)); it zero-pads the sequence itself
    # when W does not divide it.
    return (inputs["x"], 1, 2, None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
