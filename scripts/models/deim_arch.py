"""A DEIMv2-S-architecture detector in PyTorch, written from the published description
(../../../shared/facts/deim-sampling.md): random weights, the real shapes and dataflow.

It is a reference workload for rkdeploy, not a port of DEIMv2: the pieces whose exact form
does not change the graph the exporter produces in a way that matters to rkdeploy are
simplified and say so (the backbone's DINOv3 distillation, D-FINE's fine-grained
distribution refinement is replaced by RT-DETR's iterative box refinement). What is
faithful: a ViT-Tiny backbone (embed 192, 12 blocks, patch 16) with a small conv stem and
a 3-level adapter (strides 8/16/32), a hybrid encoder (an AIFI transformer layer on the
stride-32 level, a CCFM top-down/bottom-up conv fusion), 8400 encoder tokens with a TopK
query selection, a decoder of 4 layers with 8 heads and multi-scale deformable
attention (points 3,6,3 per level; no value and no output projection; the sampling core
with `default` or `discrete` method), 300 queries, 80 classes, and the post-processor
taking `orig_target_sizes` ([w, h] of the original image) exactly as DEIM/D-FINE export it.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from deim_sampling import msda_decoder as deformable_attention_core  # noqa: E402


class Cfg:
    def __init__(self, scale="s"):
        if scale == "s":  # DEIMv2-S at 640x640
            self.img = 640
            self.vit_dim, self.vit_depth, self.vit_heads = 192, 12, 3
            self.hidden, self.heads, self.ffn, self.layers, self.queries = 192, 8, 512, 4, 300
        elif scale == "tiny":  # reduced width for fast tests, same structure
            self.img = 320
            self.vit_dim, self.vit_depth, self.vit_heads = 64, 2, 2
            self.hidden, self.heads, self.ffn, self.layers, self.queries = 64, 8, 128, 2, 100
        else:
            raise ValueError(scale)
        self.points = [3, 6, 3]
        self.classes = 80
        self.strides = [8, 16, 32]


class ConvBN(nn.Module):
    def __init__(self, cin, cout, k=1, s=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class ViTBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Backbone(nn.Module):
    """ViT-Tiny (patch 16) + a conv stem for stride 8, adapted to 3 levels."""

    def __init__(self, c):
        super().__init__()
        d = c.vit_dim
        self.grid = c.img // 16
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.pos = nn.Parameter(torch.randn(1, self.grid * self.grid, d) * 0.02)
        self.blocks = nn.ModuleList([ViTBlock(d, c.vit_heads) for _ in range(c.vit_depth)])
        self.norm = nn.LayerNorm(d)
        self.stem = nn.Sequential(ConvBN(3, 32, 3, 2), ConvBN(32, 64, 3, 2), ConvBN(64, d, 3, 2))
        self.up = nn.ConvTranspose2d(d, d, 2, 2)
        self.fuse8 = ConvBN(2 * d, c.hidden, 1)
        self.out16 = ConvBN(d, c.hidden, 1)
        self.down32 = ConvBN(d, c.hidden, 3, 2)

    def forward(self, x):
        t = self.patch(x)
        n, d, h, w = t.shape
        t = t.flatten(2).transpose(1, 2) + self.pos
        for b in self.blocks:
            t = b(t)
        f16 = self.norm(t).transpose(1, 2).reshape(n, d, h, w)
        f8 = self.fuse8(torch.cat([self.stem(x), self.up(f16)], 1))
        return [f8, self.out16(f16), self.down32(f16)]


class CSPBlock(nn.Module):
    def __init__(self, cin, cout, n=2):
        super().__init__()
        self.a = ConvBN(cin, cout, 1)
        self.b = ConvBN(cin, cout, 1)
        self.m = nn.Sequential(*[ConvBN(cout, cout, 3) for _ in range(n)])

    def forward(self, x):
        return self.a(x) + self.m(self.b(x))


def sincos_2d(h, w, dim, temperature=10000.0):
    gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
    q = dim // 4
    omega = 1.0 / temperature ** (torch.arange(q, dtype=torch.float32) / q)
    ox = gx.flatten()[:, None] * omega[None]
    oy = gy.flatten()[:, None] * omega[None]
    return torch.cat([ox.sin(), ox.cos(), oy.sin(), oy.cos()], 1)[None]


class HybridEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        hd = c.hidden
        self.proj = nn.ModuleList([ConvBN(hd, hd, 1, act=False) for _ in range(3)])
        self.aifi = nn.TransformerEncoderLayer(hd, c.heads, c.ffn, dropout=0.0, activation="gelu", batch_first=True)
        self.pos = sincos_2d(c.img // 32, c.img // 32, hd)
        self.lateral = nn.ModuleList([ConvBN(hd, hd, 1) for _ in range(2)])
        self.fpn = nn.ModuleList([CSPBlock(2 * hd, hd, 1) for _ in range(2)])
        self.down = nn.ModuleList([ConvBN(hd, hd, 3, 2) for _ in range(2)])
        self.pan = nn.ModuleList([CSPBlock(2 * hd, hd, 1) for _ in range(2)])

    def forward(self, feats):
        f = [p(x) for p, x in zip(self.proj, feats)]
        n, d, h, w = f[2].shape
        t = f[2].flatten(2).transpose(1, 2)
        f[2] = self.aifi(t + self.pos).transpose(1, 2).reshape(n, d, h, w)
        inner = [f[2]]  # top-down
        for i, lvl in enumerate([1, 0]):
            top = self.lateral[i](inner[0])
            inner[0] = top
            up = F.interpolate(top, scale_factor=2.0, mode="nearest")
            inner.insert(0, self.fpn[i](torch.cat([up, f[lvl]], 1)))
        outs = [inner[0]]  # bottom-up
        for i in range(2):
            outs.append(self.pan[i](torch.cat([self.down[i](outs[-1]), inner[i + 1]], 1)))
        return outs


def inverse_sigmoid(x, eps=1e-5):
    x = x.clamp(min=0.0, max=1.0)
    return torch.log(x.clamp(min=eps) / (1 - x).clamp(min=eps))


def mlp(din, dh, dout, n):
    layers = []
    for i in range(n):
        layers += [nn.Linear(din if i == 0 else dh, dout if i == n - 1 else dh)]
        if i < n - 1:
            layers += [nn.ReLU()]
    return nn.Sequential(*layers)


class MSDeformableAttention(nn.Module):
    def __init__(self, c, method):
        super().__init__()
        self.c, self.method = c, method
        self.P = sum(c.points)
        self.sampling_offsets = nn.Linear(c.hidden, c.heads * self.P * 2)
        self.attention_weights = nn.Linear(c.hidden, c.heads * self.P)
        scale = torch.cat([torch.full((n,), 1.0 / n) for n in c.points])
        self.register_buffer("num_points_scale", scale, persistent=False)

    def forward(self, query, ref, value, shapes):
        b, lq, _ = query.shape
        c = self.c
        off = self.sampling_offsets(query).reshape(b, lq, c.heads, self.P, 2)
        aw = self.attention_weights(query).reshape(b, lq, c.heads, self.P)
        aw = F.softmax(aw, dim=-1)
        # location = ref.xy + offset / n_l * ref.wh * 0.5 (4-d reference boxes)
        scale = self.num_points_scale.unsqueeze(-1)
        loc = ref[:, :, None, None, :2] + off * scale * ref[:, :, None, None, 2:] * 0.5
        v = value.reshape(b, value.shape[1], c.heads, c.hidden // c.heads)
        return deformable_attention_core(v, shapes, loc, aw, c.points, self.method)


class DecoderLayer(nn.Module):
    def __init__(self, c, method):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(c.hidden, c.heads, batch_first=True)
        self.norm1 = nn.LayerNorm(c.hidden)
        self.cross_attn = MSDeformableAttention(c, method)
        self.norm2 = nn.LayerNorm(c.hidden)
        self.ffn = nn.Sequential(nn.Linear(c.hidden, c.ffn), nn.ReLU(), nn.Linear(c.ffn, c.hidden))
        self.norm3 = nn.LayerNorm(c.hidden)

    def forward(self, tgt, ref, value, shapes, pos):
        q = tgt + pos
        tgt = self.norm1(tgt + self.self_attn(q, q, tgt, need_weights=False)[0])
        tgt = self.norm2(tgt + self.cross_attn(tgt + pos, ref, value, shapes))
        return self.norm3(tgt + self.ffn(tgt))


class Decoder(nn.Module):
    def __init__(self, c, method):
        super().__init__()
        self.c = c
        hd = c.hidden
        self.enc_output = nn.Sequential(nn.Linear(hd, hd), nn.LayerNorm(hd))
        self.enc_score_head = nn.Linear(hd, c.classes)
        self.enc_bbox_head = mlp(hd, hd, 4, 3)
        self.query_pos_head = mlp(4, 2 * hd, hd, 2)
        self.layers = nn.ModuleList([DecoderLayer(c, method) for _ in range(c.layers)])
        self.bbox_head = nn.ModuleList([mlp(hd, hd, 4, 3) for _ in range(c.layers)])
        self.score_head = nn.Linear(hd, c.classes)

    def anchors(self, shapes, device):
        out = []
        for lvl, (h, w) in enumerate(shapes):
            gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                                    indexing="ij")
            xy = (torch.stack([gx, gy], -1) + 0.5) / torch.tensor([w, h], dtype=torch.float32)
            wh = torch.ones_like(xy) * 0.05 * (2.0 ** lvl)
            out.append(torch.cat([xy, wh], -1).reshape(-1, 4))
        a = torch.cat(out, 0)[None].to(device)
        valid = ((a > 0.01) & (a < 0.99)).all(-1, keepdim=True)
        return torch.where(valid, inverse_sigmoid(a), torch.full_like(a, float("inf"))), valid

    def forward(self, feats):
        shapes = [(f.shape[2], f.shape[3]) for f in feats]
        memory = torch.cat([f.flatten(2).transpose(1, 2) for f in feats], 1)  # [N, 8400, hidden]
        anchors, valid = self.anchors(shapes, memory.device)
        out_mem = self.enc_output(valid.to(memory.dtype) * memory)
        enc_logits = self.enc_score_head(out_mem)
        enc_boxes = self.enc_bbox_head(out_mem) + anchors
        _, idx = torch.topk(enc_logits.max(-1).values, self.c.queries, dim=1)  # TopK over the tokens
        ref_unact = enc_boxes.gather(1, idx.unsqueeze(-1).repeat(1, 1, 4))
        tgt = out_mem.gather(1, idx.unsqueeze(-1).repeat(1, 1, out_mem.shape[-1])).detach()
        ref = F.sigmoid(ref_unact).detach()
        for i, layer in enumerate(self.layers):
            pos = self.query_pos_head(ref)
            tgt = layer(tgt, ref, memory, shapes, pos)
            ref = F.sigmoid(self.bbox_head[i](tgt) + inverse_sigmoid(ref))
        return self.score_head(tgt), ref


class PostProcessor(nn.Module):
    """D-FINE/DEIM export post-processing: boxes cxcywh -> xyxy scaled by [w, h, w, h] of
    orig_target_sizes; focal-loss scores (sigmoid) and top-k over queries x classes."""

    def __init__(self, classes, top):
        super().__init__()
        self.classes, self.top = classes, top

    def forward(self, logits, boxes, orig_target_sizes):
        cx, cy, w, h = boxes.unbind(-1)
        xyxy = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)
        xyxy = xyxy * orig_target_sizes.repeat(1, 2).unsqueeze(1)
        scores = F.sigmoid(logits)
        scores, index = torch.topk(scores.flatten(1), self.top, dim=-1)
        labels = index - index // self.classes * self.classes
        index = index // self.classes
        boxes = xyxy.gather(dim=1, index=index.unsqueeze(-1).repeat(1, 1, xyxy.shape[-1]))
        return labels, boxes, scores


class DEIMArch(nn.Module):
    def __init__(self, scale="s", method="default"):
        super().__init__()
        self.cfg = c = Cfg(scale)
        self.backbone = Backbone(c)
        self.encoder = HybridEncoder(c)
        self.decoder = Decoder(c, method)
        self.post = PostProcessor(c.classes, c.queries)

    def forward(self, images, orig_target_sizes):
        logits, boxes = self.decoder(self.encoder(self.backbone(images)))
        return self.post(logits, boxes, orig_target_sizes)
