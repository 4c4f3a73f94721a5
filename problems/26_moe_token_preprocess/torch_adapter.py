"""Problem 26: calls PKB's reference/26_moe_token_preprocess.py solution() on pkb's inputs."""
UPSTREAM = "reference/26_moe_token_preprocess.py"


# PKB: solution(expert_mask [E, K, M] fp32, num_experts, group None). PKB's mask is a permuted view of a
# one-hot; pkb's is a contiguous 0/1 tensor of the same shape (the reference only sums it).
def make_args(inputs, ctx):
    return (inputs["expert_mask"], int(ctx.vars["E"]), None)


# PKB returns four CPU tensors: int64 splits, fp32 counts.
def to_outputs(result, inputs, ctx):
    input_splits, output_splits, per_local, sum_local = result
    return {
        "input_splits": input_splits,
        "output_splits": output_splits,
        "num_global_tokens_per_local_expert": per_local,
        "num_global_sum_tokens_per_local_expert": sum_local,
    }
