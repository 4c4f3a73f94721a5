"""Problem 64: calls PKB's reference/64_gnn_neighbor_sampling.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/64_gnn_neighbor_sampling.py"


def make_args(inputs, ctx):
    # PKB: solution(seed_nodes, fanouts, local_adj_row_ptr, local_adj_col, node_to_rank, group=None
    # (WORLD), replace=False); the fanouts list is pkb's F1, F2.
    fanouts = [int(ctx.vars["F1"]), int(ctx.vars["F2"])]
    return (inputs["seed_nodes"], fanouts, inputs["local_adj_row_ptr"], inputs["local_adj_col"],
            inputs["node_to_rank"], None, False)


def _padded(t, capacity):
    # PKB's variable-length result in pkb's fixed-capacity output: valid entries, then -1.
    out = torch.full((capacity,), -1, dtype=torch.long, device=t.device)
    out[: t.numel()] = t.to(torch.long)
    return out


def to_outputs(result, inputs, ctx):
    node, row, col, edge = result
    ncap, ecap = int(ctx.vars["NCAP"]), int(ctx.vars["ECAP"])
    return {
        "node": _padded(node, ncap),
        "row": _padded(row, ecap),
        "col": _padded(col, ecap),
        "edge": _padded(edge, ecap),
        "sizes": torch.tensor([node.numel(), row.numel()], dtype=torch.long, device=node.device),
    }
