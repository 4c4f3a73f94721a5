"""Problem 40: calls PKB's reference/40_ddp.py solution() on pkb's inputs."""
UPSTREAM = "reference/40_ddp.py"

LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8  # PKB's create_input_tensor constants

PARAMS = ["W1", "b1", "W2", "b2"]


# PKB: solution(X_local, y_local, W1, b1, W2, b2, exp_avg_W1..b2, exp_avg_sq_W1..b2, lr, beta1, beta2,
# eps, step), step a Python int (PKB's 1 + trial % 7; pkb's fixed parameter `step`). solution()
# flattens the tensors into new buffers, so pkb's inputs are not modified.
def make_args(inputs, ctx):
    tensors = [inputs["X_local"], inputs["y_local"]] + [inputs[p] for p in PARAMS]
    tensors += [inputs["exp_avg_" + p] for p in PARAMS] + [inputs["exp_avg_sq_" + p] for p in PARAMS]
    return (*tensors, LR, BETA1, BETA2, EPS, int(ctx.vars["step"]))


# PKB returns the 12 tensors in the order W1, b1, W2, b2, exp_avg_*, exp_avg_sq_*.
def to_outputs(result, inputs, ctx):
    names = [p + "_out" for p in PARAMS] + ["exp_avg_" + p + "_out" for p in PARAMS]
    names += ["exp_avg_sq_" + p + "_out" for p in PARAMS]
    return {n: t for n, t in zip(names, result)}
