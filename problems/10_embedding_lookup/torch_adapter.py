"""Problem 10: calls PKB's reference/10_embedding_lookup.py solution() on pkb's inputs."""
UPSTREAM = "reference/10_embedding_lookup.py"


def make_args(inputs, ctx):
    # PKB: solution(indices int64[M] in [0, W M), local_shard [M, N]).
    return (inputs["indices"], inputs["local_shard"])


def to_outputs(result, inputs, ctx):
    return {"out": result}
