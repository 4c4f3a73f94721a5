"""Problem 51: calls PKB's reference/51_moe_ep_narrow.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/51_moe_ep_narrow.py"


def _linear(weight, bias):
    """An nn.Linear holding pkb's weight [out, in] and bias [out], as PKB's _linear builds one."""
    out_features, in_features = weight.shape
    layer = torch.nn.Linear(in_features, out_features).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    return layer


# PKB: (hidden_states, gate_weight, gate_bias, gate_proj, up_proj, down_proj,
# num_experts = the largest proper divisor of W, top_k = min(2, num_experts), group None). With
# group None PKB's solution() makes the EP sub-groups (dist.new_group on every rank, a collective)
# on its first call and caches them; pkb's spec declares the same blocks of E ranks as "ep".
def make_args(inputs, ctx):
    return (inputs["hidden_states"], inputs["gate_weight"], inputs["gate_bias"],
            _linear(inputs["gate_proj_weight"], inputs["gate_proj_bias"]),
            _linear(inputs["up_proj_weight"], inputs["up_proj_bias"]),
            _linear(inputs["down_proj_weight"], inputs["down_proj_bias"]),
            int(ctx.vars["E"]), int(ctx.vars["TOPK"]), None)


def to_outputs(result, inputs, ctx):
    return {"out": result.detach()}
