"""Problem 23: calls PKB's reference/23_grad_acc_loss.py solution() on pkb's inputs."""
UPSTREAM = "reference/23_grad_acc_loss.py"


# PKB: solution(loss, local_valid_tokens, global_valid_tokens, grad_normalized_loss, grad_loss_sum),
# all 0-d tensors (pkb draws their values; see spec.toml).
def make_args(inputs, ctx):
    return (inputs["loss"], inputs["local_valid_tokens"], inputs["global_valid_tokens"],
            inputs["grad_normalized_loss"], inputs["grad_loss_sum"])


def to_outputs(result, inputs, ctx):
    normalized_loss, loss_sum, grad_loss = result
    return {"normalized_loss": normalized_loss, "loss_sum": loss_sum, "grad_loss": grad_loss}
