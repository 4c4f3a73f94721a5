"""Problem 63: calls PKB's reference/63_deepmd_kalman_filter_optimizer.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/63_deepmd_kalman_filter_optimizer.py"

KALMAN_NUE = 0.9987  # PKB's create_input_tensor passes the default


# PKB: solution(H, error, weights, P, kalman_lambda, kalman_nue) with H, weights and P lists of NB
# tensors ([B, 1], [B, 1], [B, B]) and kalman_lambda a Python float. The lists hold views of pkb's
# stacked tensors; PKB replaces the list entries (not the tensors) with the updated values and
# returns (every rank's weights as a list of W NB tensors, its P list, lambda_next).
def make_args(inputs, ctx):
    nb = int(ctx.vars["NB"])
    H = [inputs["H"][i] for i in range(nb)]
    weights = [inputs["weights"][i] for i in range(nb)]
    P = [inputs["P"][i] for i in range(nb)]
    return (H, inputs["error"], weights, P, float(inputs["kalman_lambda"].item()), KALMAN_NUE)


def to_outputs(result, inputs, ctx):
    weights, P, lambda_next = result
    return {"weights_all": torch.stack(weights), "P_next": torch.stack(P),
            "kalman_lambda_next": lambda_next.reshape(())}
