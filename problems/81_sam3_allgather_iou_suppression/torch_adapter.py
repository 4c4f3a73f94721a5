"""Problem 81: calls PKB's reference/81_sam3_allgather_iou_suppression.py solution() on pkb's inputs."""
UPSTREAM = "reference/81_sam3_allgather_iou_suppression.py"

IOU_THRESHOLD = 0.7  # PKB's create_input_tensor passes iou_threshold = 0.7 and reverse = False
REVERSE = False


# PKB: solution(low_res_masks_local D [c_r, H, Wd], obj_scores_local D [c_r], num_obj_per_gpu (a host
# list), last_occluded int64 [T], iou_threshold, reverse, group None = WORLD). The list is PKB's
# formula with pkb's shift (PKB's trial) and mult: c_j = mult (1 + ((j + shift) % 3)).
def make_args(inputs, ctx):
    mult, shift = int(ctx.vars["mult"]), int(ctx.vars["shift"])
    counts = [mult * (1 + (j + shift) % 3) for j in range(ctx.world)]
    return (inputs["low_res_masks_local"], inputs["obj_scores_local"], counts, inputs["last_occluded"],
            IOU_THRESHOLD, REVERSE, None)


def to_outputs(result, inputs, ctx):
    masks, scores, to_suppress = result
    return {"masks_global": masks, "scores_global": scores, "to_suppress": to_suppress}
