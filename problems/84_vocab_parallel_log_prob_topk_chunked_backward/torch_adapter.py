"""Problem 84: calls PKB's reference/84_vocab_parallel_log_prob_topk_chunked_backward.py solution() on pkb's inputs."""
UPSTREAM = "reference/84_vocab_parallel_log_prob_topk_chunked_backward.py"


def make_args(inputs, ctx):
    """PKB's inputs already carry "+ 8" at each target column; pkb's solution adds the boost itself
    (spec.toml says why), so it is applied here, in D, the way PKB builds its logits:
    logits + mask.to(D) * boost, with boost at the target column and boost - 1 at the two columns
    after it (mod V). target and grad_output are pkb's shared draws (grad_output bf16, as PKB's
    linspace is); tp_group None is WORLD; top_k, top_p and chunk_size are PKB's caller's 10, 0.9 and
    the spec's chunk."""
    import torch

    logits, target = inputs["vocab_parallel_logits"], inputs["target"]
    cols = logits.shape[-1]
    vocab = cols * ctx.world
    boost = float(ctx.vars["boost"])
    column = ctx.rank * cols + torch.arange(cols, dtype=torch.long, device=logits.device)
    after = (column.view(1, 1, cols) - target.unsqueeze(-1)).remainder(vocab)
    at_target = (after == 0).to(dtype=logits.dtype)
    next_two = ((after == 1) | (after == 2)).to(dtype=logits.dtype)
    boosted = logits + at_target * boost + next_two * (boost - 1.0)
    return (boosted.contiguous(), target, inputs["grad_output"], None, int(ctx.vars["top_k"]), 0.9,
            int(ctx.vars["chunk"]))


def to_outputs(result, inputs, ctx):
    return {"grad_logits": result}
