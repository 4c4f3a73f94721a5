"""Problem 61: calls PKB's reference/61_gsplat_3d_gaussian_splatting.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/61_gsplat_3d_gaussian_splatting.py"

# PKB: solution(means, quats, scales, opacities, colors, viewmats, Ks, image_width, image_height,
# eps2d, near_plane, far_plane, camera_model). The image size, eps2d, near_plane (3.03125 here, PKB's
# 0.01: see the spec) and far_plane are the spec's parameters; camera_model is "pinhole" as in PKB.
#
# PKB's solution() computes in its inputs' dtype, op by op. In bf16 that chain is itself far from the
# exact projection (cancellation in the 2-D covariance): measured on one H200 (2026-12-02, W = 2,
# default size), 2084 to 2594 of 6144 conics elements per rank and trial beyond the spec's tolerance
# (up to 1.25 absolute), while pkb's baseline (fp32) matches the double-precision oracle. So the
# check runs PKB's code on the same values upcast to fp32 and rounds its floating outputs to bf16,
# pkb's output dtype: it checks PKB's semantics (culling, packing order, ids, formulas), not its
# bf16 rounding. Integer outputs come back as PKB makes them.
def make_args(inputs, ctx):
    v = ctx.vars
    f32 = lambda name: inputs[name].float()
    return (f32("means"), f32("quats"), f32("scales"), f32("opacities"), f32("colors"),
            f32("viewmats"), f32("Ks"), int(v["width"]), int(v["height"]), float(v["eps2d"]),
            float(v["near_plane"]), float(v["far_plane"]), "pinhole")


OUTPUTS = ("camera_ids", "gaussian_ids", "radii", "means2d", "depths", "conics", "opacities", "colors")


# PKB returns tensors of n_r rows (the visible pairs this rank receives); pkb's outputs have
# CAP = W C N rows, the rows past n_r all -1. Only that padding is added here.
def to_outputs(result, inputs, ctx):
    cap = int(ctx.vars["CAP"])
    out = {}
    for name, t in zip(OUTPUTS, result):
        if t.is_floating_point():
            t = t.to(torch.bfloat16)
        padded = torch.full((cap,) + tuple(t.shape[1:]), -1, dtype=t.dtype, device=t.device)
        padded[: t.shape[0]] = t
        out[name] = padded
    return out
