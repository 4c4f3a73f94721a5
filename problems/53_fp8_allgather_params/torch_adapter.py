"""Problem 53: calls PKB's reference/53_fp8_allgather_params.py solution() on pkb's inputs."""
UPSTREAM = "reference/53_fp8_allgather_params.py"


# PKB: solution(flat_param_shard [P] in D, amax_history bf16 [16]); neither is modified.
def make_args(inputs, ctx):
    return (inputs["flat_param_shard"], inputs["amax_history"])


# PKB returns (full [W P], updated_hist [16]).
def to_outputs(result, inputs, ctx):
    full, updated_hist = result
    return {"full": full, "updated_hist": updated_hist}
