"""Problem 82: calls PKB's reference/82_vocab_parallel_log_prob_topk.py solution() on pkb's inputs."""
UPSTREAM = "reference/82_vocab_parallel_log_prob_topk.py"


def make_args(inputs, ctx):
    """PKB's inputs already carry "+ 8" at each target column; pkb's solution adds `boost` itself
    (spec.toml says why), so the boost is applied here, in D, the way PKB builds its logits:
    logits + (column == target).to(D) * boost. target is pkb's shared draw; tp_group None is WORLD;
    top_k and top_p are PKB's caller's 10 and 0.9."""
    import torch

    logits, target = inputs["vocab_parallel_logits"], inputs["target"]
    cols = logits.shape[-1]
    column = ctx.rank * cols + torch.arange(cols, dtype=torch.long, device=logits.device)
    mask = column.view(1, 1, cols) == target.unsqueeze(-1)
    boosted = logits + mask.to(dtype=logits.dtype) * float(ctx.vars["boost"])
    return (boosted.contiguous(), target, None, int(ctx.vars["top_k"]), 0.9)


def to_outputs(result, inputs, ctx):
    return {"log_prob": result}
