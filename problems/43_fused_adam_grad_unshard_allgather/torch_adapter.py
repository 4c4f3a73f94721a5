"""Problem 43: calls PKB's reference/43_fused_adam_grad_unshard_allgather.py solution() on pkb's inputs."""
UPSTREAM = "reference/43_fused_adam_grad_unshard_allgather.py"

LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8  # PKB's create_input_tensor constants


# PKB: solution(grad_shard, master_shard, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, step), step a
# Python int (PKB's 1 + trial % 7; pkb draws it per trial as a shared int64 [1] tensor). pkb's master
# weights, exp_avg and exp_avg_sq are drawn differently from PKB's (spec.toml); solution() clones them.
def make_args(inputs, ctx):
    step = int(inputs["step"].item())
    return (inputs["grad_shard"], inputs["master_shard"], inputs["exp_avg"], inputs["exp_avg_sq"], LR, BETA1, BETA2,
            EPS, step)


def to_outputs(result, inputs, ctx):
    return {"gathered": result}
