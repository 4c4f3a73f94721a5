"""Problem 29: calls PKB's reference/29_moe_post_all2all.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/29_moe_post_all2all.py"


# PKB: solution(expert_outputs, routing_weights, selected_experts, num_experts, input_splits,
# output_splits, num_global_tokens_per_local_expert, routing_map, local_input_permutation_mapping,
# org_hidden_states_shape, group None = WORLD). Its generator passes the splits as Python lists, the
# chunk sizes as an int64 tensor [W, L], routing_map as bool and the shape as a torch.Size.
def make_args(inputs, ctx):
    M = int(ctx.vars["M"])
    N = int(ctx.vars["N"])
    return (
        inputs["expert_outputs"],
        inputs["routing_weights"],
        inputs["selected_experts"],
        int(ctx.vars["E"]),
        inputs["input_splits"].tolist(),
        inputs["output_splits"].tolist(),
        inputs["num_global_tokens_per_local_expert"],
        inputs["routing_map"],
        inputs["local_input_permutation_mapping"],
        torch.Size([M, N]),
        None,
    )


def to_outputs(result, inputs, ctx):
    return {"out": result}
