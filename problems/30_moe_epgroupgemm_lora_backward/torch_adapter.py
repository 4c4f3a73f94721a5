"""Problem 30: calls PKB's reference/30_moe_epgroupgemm_lora_backward.py solution() on pkb's inputs."""
UPSTREAM = "reference/30_moe_epgroupgemm_lora_backward.py"


# PKB: solution(grad_fc1_1_lora_A, grad_fc1_2_lora_A, grad_fc2_lora_B, group=None (WORLD)). It reduces
# pkb's own (mutable) input tensors in place and returns them.
def make_args(inputs, ctx):
    return (inputs["grad_fc1_1_lora_A"], inputs["grad_fc1_2_lora_A"], inputs["grad_fc2_lora_B"], None)


def to_outputs(result, inputs, ctx):
    a1, a2, b = result
    return {"fc1_1_lora_A_sum": a1, "fc1_2_lora_A_sum": a2, "fc2_lora_B_sum": b}
