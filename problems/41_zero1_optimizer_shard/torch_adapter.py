"""Problem 41: calls PKB's reference/41_zero1_optimizer_shard.py solution() on pkb's inputs."""
UPSTREAM = "reference/41_zero1_optimizer_shard.py"

LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8  # PKB's create_input_tensor constants


# PKB: solution(X_local, y_local, W1, b1, W2, b2, exp_avg_part, exp_avg_sq_part, lr, beta1, beta2, eps,
# step), step a Python int (PKB's 1 + trial % 7; pkb's fixed parameter `step`). solution() flattens
# the parameters into a new buffer and clones the state slices, so pkb's inputs are not modified.
def make_args(inputs, ctx):
    names = ["X_local", "y_local", "W1", "b1", "W2", "b2", "exp_avg_part", "exp_avg_sq_part"]
    return (*[inputs[n] for n in names], LR, BETA1, BETA2, EPS, int(ctx.vars["step"]))


# PKB returns (W1, b1, W2, b2, m_part, v_part).
def to_outputs(result, inputs, ctx):
    names = ["W1_out", "b1_out", "W2_out", "b2_out", "exp_avg_part_out", "exp_avg_sq_part_out"]
    return {n: t for n, t in zip(names, result)}
