"""A YOLOv8n-architecture detector in PyTorch (random weights, the real shapes and
dataflow), written from the published architecture: Conv-BN-SiLU, C2f blocks, SPPF, a
top-down/bottom-up neck and the decoupled anchor-free head with DFL (reg_max 16). The
exported graph decodes boxes in-graph and outputs [N, 4 + classes, 8400] (xywh in input
pixels, then per-class sigmoid scores), the layout of the usual ONNX export; NMS is left to
the runtime's post-processing. Widths/depths of the 'n' scale: 16-32-64-128-256, C2f
repeats 1-2-2-1."""
import torch
import torch.nn as nn

from yolo_zoo import C2f, SPPF, Conv, PanDetector  # the blocks and the neck the zoo's YOLOv8 shares


class Detect(nn.Module):
    def __init__(self, nc, chs, img, reg_max=16):
        super().__init__()
        self.nc, self.reg_max = nc, reg_max
        c2, c3 = max(16, chs[0] // 4, 4 * reg_max), max(chs[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)) for c in chs)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for c in chs)
        self.register_buffer("proj", torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1), persistent=False)
        anchors, strides = [], []
        for s in (8, 16, 32):
            h = w = img // s
            gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5, torch.arange(w, dtype=torch.float32) + 0.5,
                                    indexing="ij")
            anchors.append(torch.stack([gx, gy], 0).reshape(2, -1))
            strides.append(torch.full((1, h * w), float(s)))
        self.register_buffer("anchors", torch.cat(anchors, 1), persistent=False)  # [2, 8400]
        self.register_buffer("strides", torch.cat(strides, 1), persistent=False)  # [1, 8400]

    def forward(self, feats):
        n = feats[0].shape[0]
        x = [torch.cat([self.cv2[i](f), self.cv3[i](f)], 1).view(n, 4 * self.reg_max + self.nc, -1)
             for i, f in enumerate(feats)]
        x = torch.cat(x, 2)
        box, cls = x.split((4 * self.reg_max, self.nc), 1)
        # DFL: expectation of a softmax over reg_max bins per side (l, t, r, b)
        b = box.view(n, 4, self.reg_max, -1).transpose(2, 1).softmax(1)
        dist = nn.functional.conv2d(b, self.proj).view(n, 4, -1)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = self.anchors - lt, self.anchors + rb
        xywh = torch.cat([(x1y1 + x2y2) / 2, x2y2 - x1y1], 1) * self.strides
        return torch.cat([xywh, cls.sigmoid()], 1)


class YOLOv8Arch(PanDetector):
    def __init__(self, nc=80, img=640):
        super().__init__()
        self.b0 = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True), Conv(32, 64, 3, 2),
                                C2f(64, 64, 2, True))  # P3/8
        self.b1 = nn.Sequential(Conv(64, 128, 3, 2), C2f(128, 128, 2, True))  # P4/16
        self.b2 = nn.Sequential(Conv(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256))  # P5/32
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h1 = C2f(256 + 128, 128, 1)
        self.h2 = C2f(128 + 64, 64, 1)
        self.d1, self.h3 = Conv(64, 64, 3, 2), C2f(64 + 128, 128, 1)
        self.d2, self.h4 = Conv(128, 128, 3, 2), C2f(128 + 256, 256, 1)
        self.detect = Detect(nc, (64, 128, 256), img)

    def forward(self, images):
        return self.detect(self.neck(images))
