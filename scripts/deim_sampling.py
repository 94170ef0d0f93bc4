"""The sampling core of the D-FINE/DEIM decoders in PyTorch, shared by the golden-fixture
generator (scripts/gen_golden.py), the reference model (scripts/models/deim_arch.py) and the
PyTorch benchmark peer (bench/peers/torch_peer.py)."""
import torch
import torch.nn.functional as F


def msda_decoder(value, shapes, locations, weights, points, method):
    """The sampling core of D-FINE/DEIM (deformable_attention_core_func_v2), written from
    the published description: default = grid_sample on 2*loc-1; discrete = integer
    gather with both coordinates clamped to H-1; discrete_fixed = x to W-1, y to H-1."""
    bs, _, n_head, c = value.shape
    _, len_q, _, _, _ = locations.shape
    split = [h * w for h, w in shapes]
    value_list = value.permute(0, 2, 3, 1).flatten(0, 1).split(split, dim=-1)
    grids = 2 * locations - 1 if method == "default" else locations
    grids = grids.permute(0, 2, 1, 3, 4).flatten(0, 1)
    grid_list = grids.split(points, dim=-2)
    out = []
    for lvl, (h, w) in enumerate(shapes):
        v = value_list[lvl].reshape(bs * n_head, c, h, w)
        g = grid_list[lvl]
        if method == "default":
            s = F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False)
        else:
            coord = (g * torch.tensor([[w, h]], device=value.device) + 0.5).to(torch.int64)
            if method == "discrete":
                coord = coord.clamp(0, h - 1)
            else:
                coord = torch.stack([coord[..., 0].clamp(0, w - 1), coord[..., 1].clamp(0, h - 1)], -1)
            coord = coord.reshape(bs * n_head, len_q * points[lvl], 2)
            sidx = torch.arange(coord.shape[0], device=value.device).unsqueeze(-1).repeat(1, coord.shape[1])
            s = v[sidx, :, coord[..., 1], coord[..., 0]]
            s = s.permute(0, 2, 1).reshape(bs * n_head, c, len_q, points[lvl])
        out.append(s)
    aw = weights.permute(0, 2, 1, 3).reshape(bs * n_head, 1, len_q, sum(points))
    o = (torch.concat(out, dim=-1) * aw).sum(-1).reshape(bs, n_head * c, len_q)
    return o.permute(0, 2, 1)
