"""Problem 62: calls PKB's reference/62_torchharmonics_spherical_convolution.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/62_torchharmonics_spherical_convolution.py"


def _polar_azimuth_groups(ctx, azimuth_size):
    """PKB's _build_polar_azimuth_groups: azimuth = contiguous blocks of azimuth_size ranks, made
    first; polar = the ranks with the same azimuth index, strided. Same order on every rank."""
    polar_size = ctx.world // azimuth_size
    azimuth_group = ctx.new_groups([list(range(p * azimuth_size, (p + 1) * azimuth_size)) for p in range(polar_size)])
    polar_group = ctx.new_groups([[p * azimuth_size + a for p in range(polar_size)] for a in range(azimuth_size)])
    return azimuth_group, polar_group


def _sparse_psi(values, ctx):
    """PKB's sparse COO psi [K, H, Hl L] from pkb's values [K, H, E], with PKB's index formula in its
    cursor order (k, out_lat, e): column local_lat L + (out_lat + e (k + 1)) mod L, local_lat =
    (out_lat - lat_offset) mod Hl, lat_offset = polar_rank Hl; then .coalesce(), as PKB does."""
    K, H, E = (int(ctx.vars[v]) for v in ("K", "H", "E"))
    Hl, L, A = int(ctx.vars["Hl"]), int(ctx.vars["L"]), int(ctx.vars["A"])
    lat_offset = (ctx.rank // A) * Hl
    dev = values.device
    k = torch.arange(K, device=dev).view(K, 1, 1).expand(K, H, E)
    h = torch.arange(H, device=dev).view(1, H, 1).expand(K, H, E)
    e = torch.arange(E, device=dev).view(1, 1, E).expand(K, H, E)
    col = torch.remainder(h - lat_offset, Hl) * L + torch.remainder(h + e * (k + 1), L)
    idx = torch.stack([k.reshape(-1), h.reshape(-1), col.reshape(-1)]).to(torch.long)
    return torch.sparse_coo_tensor(idx, values.reshape(-1), size=(K, H, Hl * L), device=dev).coalesce()


# PKB's create_input_tensor returns (x, psi, weight, groups 1, nlon_out, nlon_in, azimuth_group,
# polar_group, bias), every tensor fp32 and drawn per rank; nlon_out = nlon_in = L.
def make_args(inputs, ctx):
    azimuth_group, polar_group = _polar_azimuth_groups(ctx, int(ctx.vars["A"]))
    L = int(ctx.vars["L"])
    psi = _sparse_psi(inputs["psi"], ctx)
    return (inputs["x"], psi, inputs["weight"], 1, L, L, azimuth_group, polar_group, inputs["bias"])


def to_outputs(result, inputs, ctx):
    return {"out": result}
