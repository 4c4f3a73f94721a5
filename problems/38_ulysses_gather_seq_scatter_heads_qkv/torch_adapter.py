"""Problem 38: calls PKB's reference/38_ulysses_gather_seq_scatter_heads_qkv.py solution() on pkb's inputs."""
UPSTREAM = "reference/38_ulysses_gather_seq_scatter_heads_qkv.py"


def make_args(inputs, ctx):
    # PKB: solution(qkv_tensor, seq_dim=1, group=None (WORLD), unpadded_dim_size=None (taken as 0:
    # nothing is unpadded), restore_shape=True).
    return (inputs["qkv"], 1, None, None, True)


def to_outputs(result, inputs, ctx):
    return {"out": result}
