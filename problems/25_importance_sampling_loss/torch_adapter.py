"""Problem 25: calls PKB's reference/25_importance_sampling_loss.py solution() on pkb's inputs."""
UPSTREAM = "reference/25_importance_sampling_loss.py"


# PKB: solution(hidden_states, weight, labels, old_logprobs, advantages, ignore_index -100). pkb draws
# the hidden states and the weight on grids and old_logprobs / advantages around their own centres (advantages positive)
# (see spec.toml); every input differs per rank, as PKB's per-rank seeds make them.
def make_args(inputs, ctx):
    return (inputs["hidden_states"], inputs["weight"], inputs["labels"], inputs["old_logprobs"],
            inputs["advantages"], int(ctx.vars["ignore_index"]))


# PKB returns (loss, None, per_token_logprobs, per_token_loss, metrics); the None is dropped. loss and
# metrics come back fp32 for a bf16 run (0-d D sums divided by the 0-d fp32 count promote to fp32).
def to_outputs(result, inputs, ctx):
    loss, _, per_token_logprobs, per_token_loss, metrics = result
    return {"loss": loss.reshape(()), "per_token_logprobs": per_token_logprobs, "per_token_loss": per_token_loss,
            "metrics": metrics}
