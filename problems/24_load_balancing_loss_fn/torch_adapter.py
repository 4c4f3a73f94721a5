"""Problem 24: calls PKB's reference/24_load_balancing_loss_fn.py solution() on pkb's inputs."""
UPSTREAM = "reference/24_load_balancing_loss_fn.py"


# PKB: solution(gate_logits [M, 8], num_experts 8, top_k 2, attention_mask None). pkb adds its shared
# router_bias to the logits first (a D add, as the baseline's first step; see spec.toml for why).
def make_args(inputs, ctx):
    gate_logits = inputs["gate_logits"] + inputs["router_bias"]
    return (gate_logits, int(ctx.vars["E"]), int(ctx.vars["K"]), None)


def to_outputs(result, inputs, ctx):
    return {"loss": result.reshape(())}
