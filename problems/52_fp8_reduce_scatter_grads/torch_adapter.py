"""Problem 52: calls PKB's reference/52_fp8_reduce_scatter_grads.py solution() on pkb's inputs."""
UPSTREAM = "reference/52_fp8_reduce_scatter_grads.py"


# PKB: solution(flat_grads [P W] in D, amax_history bf16 [16]); neither is modified.
def make_args(inputs, ctx):
    return (inputs["flat_grads"], inputs["amax_history"])


# PKB returns (out_shard [P], updated_hist [16]).
def to_outputs(result, inputs, ctx):
    out_shard, updated_hist = result
    return {"out_shard": out_shard, "updated_hist": updated_hist}
