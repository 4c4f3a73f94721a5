"""Problem 74: calls PKB's reference/74_fla_kimi_delta_attention_cp_tp.py solution() on pkb's inputs."""
import torch.distributed as dist

UPSTREAM = "reference/74_fla_kimi_delta_attention_cp_tp.py"


def _tp_cp_groups(ctx):
    """PKB's create_input_tensor for 74: for an even W >= 4, _build_tp_cp_groups(tp_size=2) (TP
    pairs of consecutive ranks, made first; CP groups of equal rank % 2); otherwise cp_group = WORLD
    and tp_group None. Every rank makes the groups in the same order."""
    if ctx.world < 4 or ctx.world % 2 != 0:
        return dist.group.WORLD, None
    tp_size, cp_size = 2, ctx.world // 2
    tp_group = ctx.new_groups([list(range(c * tp_size, (c + 1) * tp_size)) for c in range(cp_size)])
    cp_group = ctx.new_groups([[p + c * tp_size for c in range(cp_size)] for p in range(tp_size)])
    return cp_group, tp_group


# PKB's order: q, k, v, g, beta, a_log, dt_bias, cp_group, tp_group. pkb's a_log and dt_bias are random
# (PKB: linspace), bf16 and shared, as PKB's are.
def make_args(inputs, ctx):
    cp_group, tp_group = _tp_cp_groups(ctx)
    return (inputs["q"], inputs["k"], inputs["v"], inputs["g"], inputs["beta"], inputs["a_log"],
            inputs["dt_bias"], cp_group, tp_group)


def to_outputs(result, inputs, ctx):
    return {"out": result}
