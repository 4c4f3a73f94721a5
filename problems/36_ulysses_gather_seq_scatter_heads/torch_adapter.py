"""Problem 36: calls PKB's reference/36_ulysses_gather_seq_scatter_heads.py solution() on pkb's inputs."""
UPSTREAM = "reference/36_ulysses_gather_seq_scatter_heads.py"


def make_args(inputs, ctx):
    # PKB: solution(x, seq_dim=1, head_dim=2, group=None (WORLD), unpadded_dim_size=0).
    return (inputs["x"], 1, 2, None, 0)


def to_outputs(result, inputs, ctx):
    return {"out": result}
