"""Problem 22: calls PKB's reference/22_clip_grad_norm_ep.py solution() on pkb's inputs."""
import torch.distributed as dist

UPSTREAM = "reference/22_clip_grad_norm_ep.py"


def _ep_groups(ep_size, ctx):
    """PKB's _build_ep_fsdp_groups: (ep_group, ep_fsdp_group), made in the same order on every rank.
    ep = contiguous blocks of ep_size ranks, ep_fsdp = strided; (None, WORLD) when ep_size <= 1."""
    if ep_size <= 1 or ctx.world % ep_size != 0:
        return None, dist.group.WORLD
    ep_group = ep_fsdp_group = None
    for blk in range(ctx.world // ep_size):
        ranks = list(range(blk * ep_size, (blk + 1) * ep_size))
        g = ctx.new_group(ranks)
        if ctx.rank in ranks:
            ep_group = g
    for ep_idx in range(ep_size):
        ranks = [ep_idx + blk * ep_size for blk in range(ctx.world // ep_size)]
        g = ctx.new_group(ranks)
        if ctx.rank in ranks:
            ep_fsdp_group = g
    return ep_group, ep_fsdp_group


# PKB passes one-tensor lists, max_norm 1.0, norm_type 2.0, ep_size max(1, W // 2), fsdp_group WORLD.
# The gradients are scaled and clipped in place, as in PKB; only total_norm is compared.
def make_args(inputs, ctx):
    ep_size = max(1, ctx.world // 2)
    ep_group, ep_fsdp_group = _ep_groups(ep_size, ctx)
    return ([inputs["non_ep_grad"]], [inputs["ep_grad"]], 1.0, 2.0, ep_size, dist.group.WORLD, ep_fsdp_group,
            ep_group)


def to_outputs(result, inputs, ctx):
    return {"total_norm": result.reshape(())}
