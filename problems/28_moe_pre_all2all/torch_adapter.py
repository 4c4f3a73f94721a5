"""Problem 28: calls PKB's reference/28_moe_pre_all2all.py solution() on pkb's inputs."""
UPSTREAM = "reference/28_moe_pre_all2all.py"


# PKB: solution(hidden_states, expert_mask, num_experts, input_splits, output_splits,
# num_global_tokens_per_local_expert, group None = WORLD). Its generator passes the splits as Python
# lists and the chunk sizes as an int64 tensor [W, L]; pkb's are random (see the spec), the same kinds.
def make_args(inputs, ctx):
    return (
        inputs["hidden_states"],
        inputs["expert_mask"],
        int(ctx.vars["E"]),
        inputs["input_splits"].tolist(),
        inputs["output_splits"].tolist(),
        inputs["num_global_tokens_per_local_expert"],
        None,
    )


# PKB returns (permuted rows, routing_map fp32, mapping int64, torch.Size); the Size is dropped.
def to_outputs(result, inputs, ctx):
    permuted, routing_map, mapping, _shape = result
    return {
        "global_permuted_hidden_states": permuted,
        "routing_map": routing_map,
        "local_input_permutation_mapping": mapping,
    }
