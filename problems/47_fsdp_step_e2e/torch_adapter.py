"""Problem 47: calls PKB's reference/47_fsdp_step_e2e.py solution() on pkb's inputs."""
UPSTREAM = "reference/47_fsdp_step_e2e.py"

LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-3, 0.9, 0.999, 1e-8, 0.01  # PKB's create_input_tensor constants


# PKB: solution(X_local, y_local, flat_param_shard, param_shapes, exp_avg_shard, exp_avg_sq_shard, lr,
# beta1, beta2, eps, weight_decay, step), param_shapes ((HID, DIN), (HID,), (DOUT, HID), (DOUT,)) and
# step a Python int (PKB's 1 + trial % 7; pkb's fixed parameter `step`). solution() clones the shards,
# so pkb's inputs are not modified.
def make_args(inputs, ctx):
    din, hid, dout = (int(ctx.vars[k]) for k in ("DIN", "HID", "DOUT"))
    shapes = ((hid, din), (hid,), (dout, hid), (dout,))
    return (inputs["X_local"], inputs["y_local"], inputs["flat_param_shard"], shapes, inputs["exp_avg_shard"],
            inputs["exp_avg_sq_shard"], LR, BETA1, BETA2, EPS, WEIGHT_DECAY, int(ctx.vars["step"]))


# PKB returns (theta, m, v).
def to_outputs(result, inputs, ctx):
    return {"theta": result[0], "m": result[1], "v": result[2]}
