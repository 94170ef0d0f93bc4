"""The detectors of the vendor model zoo's latency table (RKNN 2.3.2, RK3588, INT8, 640 x 640) as
their zoo exports shape them: PyTorch modules with random weights, written from the published
architectures (the YOLOv5 v6.0, YOLOX, YOLOv8, YOLO11 and YOLOv10 configurations), their heads
cut where the zoo's conversion scripts cut them - the decoding runs on the CPU after the timed
inference:

- yolov5s, yolov5s_relu: the three detection convolutions' raw outputs [N, 255, H, W] (SiLU, or
  ReLU throughout for the _relu model);
- yolox_s: per level [N, 85, H, W] = box (4), sigmoid objectness (1), sigmoid class scores (80);
- yolov8n, yolov8s, yolo11n, yolov10n: per level the box distribution [N, 64, H, W] (DFL logits),
  the sigmoid class scores [N, 80, H, W] and their clipped sum [N, 1, H, W].

Published multiply-accumulates at 640 (half the "FLOPs" of the upstream model cards) check the
shapes: yolov5s 8.2 G, yolox_s 13.4 G, yolov8n 4.4 G, yolov8s 14.3 G, yolo11n 3.2 G, yolov10n
3.3 G (make_models.py prints each model's count)."""
import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, cin, cout, k=1, s=1, g=1, act="silu", p=None):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2 if p is None else p, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)
        self.act = {"silu": nn.SiLU(), "relu": nn.ReLU(), None: nn.Identity()}[act]

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    # k1 x k1 then k2 x k2 (YOLOv5/YOLOX: 1 then 3; YOLOv8/11: 3 then 3)
    def __init__(self, c, shortcut=True, k1=3, k2=3, act="silu"):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, k1, act=act), Conv(c, c, k2, act=act), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    # YOLOv5's C3 and YOLOX's CSPLayer: two 1x1 branches, n bottlenecks on one, a 1x1 after the cat.
    def __init__(self, cin, cout, n=1, shortcut=True, act="silu", k1=1):
        super().__init__()
        c = cout // 2
        self.cv1, self.cv2, self.cv3 = Conv(cin, c, 1, act=act), Conv(cin, c, 1, act=act), Conv(2 * c, cout, 1, act=act)
        self.m = nn.Sequential(*(Bottleneck(c, shortcut, k1, 3, act) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class C2f(nn.Module):
    # YOLOv8's C2f; with `block` another inner module (YOLO11's C3k2, YOLOv10's C2fCIB).
    def __init__(self, cin, cout, n=1, shortcut=False, e=0.5, block=None):
        super().__init__()
        self.c = int(cout * e)
        self.cv1 = Conv(cin, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, cout, 1)
        self.m = nn.ModuleList((block or (lambda c: Bottleneck(c, shortcut)))(self.c) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout, k=5, act="silu"):
        super().__init__()
        c = cin // 2
        self.cv1, self.cv2 = Conv(cin, c, 1, act=act), Conv(4 * c, cout, 1, act=act)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class Attention(nn.Module):
    # YOLO11's / YOLOv10's position-sensitive attention over the H x W tokens of a map.
    def __init__(self, dim, heads, attn_ratio=0.5):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.key_dim = int(self.head_dim * attn_ratio)
        self.scale = self.key_dim ** -0.5
        self.qkv = Conv(dim, dim + 2 * self.key_dim * heads, 1, act=None)
        self.proj = Conv(dim, dim, 1, act=None)
        self.pe = Conv(dim, dim, 3, g=dim, act=None)

    def forward(self, x):
        b, c, h, w = x.shape
        n = h * w
        q, k, v = self.qkv(x).view(b, self.heads, 2 * self.key_dim + self.head_dim, n).split(
            [self.key_dim, self.key_dim, self.head_dim], 2)
        attn = ((q.transpose(-2, -1) @ k) * self.scale).softmax(-1)
        y = (v @ attn.transpose(-2, -1)).view(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        return self.proj(y)


class PSABlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn = Attention(c, max(c // 64, 1))
        self.ffn = nn.Sequential(Conv(c, 2 * c, 1), Conv(2 * c, c, 1, act=None))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.ffn(x)


class PSA(nn.Module):
    # C2PSA (YOLO11, n blocks) and PSA (YOLOv10, one block): attention on half the channels.
    def __init__(self, c1, n=1):
        super().__init__()
        self.c = c1 // 2
        self.cv1, self.cv2 = Conv(c1, 2 * self.c, 1), Conv(2 * self.c, c1, 1)
        self.m = nn.Sequential(*(PSABlock(self.c) for _ in range(n)))

    def forward(self, x):
        a, b = self.cv1(x).split((self.c, self.c), 1)
        return self.cv2(torch.cat([a, self.m(b)], 1))


class C3k(nn.Module):
    # YOLO11's inner C3 with 3x3 bottlenecks.
    def __init__(self, c, n=2):
        super().__init__()
        h = c // 2
        self.cv1, self.cv2, self.cv3 = Conv(c, h, 1), Conv(c, h, 1), Conv(2 * h, c, 1)
        self.m = nn.Sequential(*(Bottleneck(h, True) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


def C3k2(cin, cout, n=1, c3k=False, e=0.5):
    return C2f(cin, cout, n, True, e, (lambda c: C3k(c)) if c3k else None)


class CIB(nn.Module):
    # YOLOv10's compact inverted block; its large-kernel RepVGG depthwise pair fused (one 7x7).
    def __init__(self, c, lk=True):
        super().__init__()
        self.cv1 = nn.Sequential(Conv(c, c, 3, g=c), Conv(c, 2 * c, 1), Conv(2 * c, 2 * c, 7 if lk else 3, g=2 * c),
                                 Conv(2 * c, c, 1), Conv(c, c, 3, g=c))

    def forward(self, x):
        return x + self.cv1(x)


class SCDown(nn.Module):
    def __init__(self, cin, cout, k=3, s=2):
        super().__init__()
        self.cv1, self.cv2 = Conv(cin, cout, 1), Conv(cout, cout, k, s, g=cout, act=None)

    def forward(self, x):
        return self.cv2(self.cv1(x))


class ZooDflHead(nn.Module):
    # The zoo's cut of the anchor-free head: per level box logits, sigmoid scores, their sum.
    def __init__(self, chs, nc=80, dw_cls=False):
        super().__init__()
        c2, c3 = max(16, chs[0] // 4, 64), max(chs[0], min(nc, 100))
        self.box = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 64, 1)) for c in chs)
        if dw_cls:
            self.cls = nn.ModuleList(nn.Sequential(Conv(c, c, 3, g=c), Conv(c, c3, 1), Conv(c3, c3, 3, g=c3), Conv(c3, c3, 1),
                                                   nn.Conv2d(c3, nc, 1)) for c in chs)
        else:
            self.cls = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for c in chs)

    def forward(self, feats):
        out = []
        for i, f in enumerate(feats):
            scores = self.cls[i](f).sigmoid()
            out += [self.box[i](f), scores, scores.sum(1, keepdim=True).clamp(0, 1)]
        return tuple(out)


class PanDetector(nn.Module):
    # YOLOv8's, YOLO11's and YOLOv10's dataflow: backbone stages b0 (P3), b1 (P4), b2 (P5), a
    # top-down then bottom-up neck (h1..h4, downsamplings d1, d2), the head on P3..P5.
    def neck(self, images):
        p3 = self.b0(images)
        p4 = self.b1(p3)
        p5 = self.b2(p4)
        t4 = self.h1(torch.cat([self.up(p5), p4], 1))
        o3 = self.h2(torch.cat([self.up(t4), p3], 1))
        o4 = self.h3(torch.cat([self.d1(o3), t4], 1))
        o5 = self.h4(torch.cat([self.d2(o4), p5], 1))
        return [o3, o4, o5]

    def forward(self, images):
        return self.head(self.neck(images))


class YOLOv8(PanDetector):
    def __init__(self, w=(16, 32, 64, 128, 256), nc=80):
        super().__init__()
        a, b, c, d, e = w
        self.b0 = nn.Sequential(Conv(3, a, 3, 2), Conv(a, b, 3, 2), C2f(b, b, 1, True), Conv(b, c, 3, 2), C2f(c, c, 2, True))
        self.b1 = nn.Sequential(Conv(c, d, 3, 2), C2f(d, d, 2, True))
        self.b2 = nn.Sequential(Conv(d, e, 3, 2), C2f(e, e, 1, True), SPPF(e, e))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h1, self.h2 = C2f(e + d, d, 1), C2f(d + c, c, 1)
        self.d1, self.h3 = Conv(c, c, 3, 2), C2f(c + d, d, 1)
        self.d2, self.h4 = Conv(d, d, 3, 2), C2f(d + e, e, 1)
        self.head = ZooDflHead((c, d, e), nc)



class YOLO11n(PanDetector):
    def __init__(self, nc=80):
        super().__init__()
        self.b0 = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C3k2(32, 64, 1, False, 0.25), Conv(64, 64, 3, 2),
                                C3k2(64, 128, 1, False, 0.25))  # P3
        self.b1 = nn.Sequential(Conv(128, 128, 3, 2), C3k2(128, 128, 1, True))  # P4
        self.b2 = nn.Sequential(Conv(128, 256, 3, 2), C3k2(256, 256, 1, True), SPPF(256, 256), PSA(256, 1))  # P5
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h1, self.h2 = C3k2(256 + 128, 128, 1, False), C3k2(128 + 128, 64, 1, False)
        self.d1, self.h3 = Conv(64, 64, 3, 2), C3k2(64 + 128, 128, 1, False)
        self.d2, self.h4 = Conv(128, 128, 3, 2), C3k2(128 + 256, 256, 1, True)
        self.head = ZooDflHead((64, 128, 256), nc, dw_cls=True)



class YOLOv10n(PanDetector):
    def __init__(self, nc=80):
        super().__init__()
        self.b0 = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True), Conv(32, 64, 3, 2), C2f(64, 64, 2, True))
        self.b1 = nn.Sequential(SCDown(64, 128), C2f(128, 128, 2, True))
        self.b2 = nn.Sequential(SCDown(128, 256), C2f(256, 256, 1, True), SPPF(256, 256), PSA(256, 1))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h1, self.h2 = C2f(256 + 128, 128, 1), C2f(128 + 64, 64, 1)
        self.d1, self.h3 = Conv(64, 64, 3, 2), C2f(64 + 128, 128, 1)
        self.d2, self.h4 = SCDown(128, 128), C2f(128 + 256, 256, 1, True, block=lambda c: CIB(c))
        self.head = ZooDflHead((64, 128, 256), nc, dw_cls=True)



class YOLOv5s(nn.Module):
    def __init__(self, act="silu", nc=80):
        super().__init__()
        self.b0 = nn.Sequential(Conv(3, 32, 6, 2, act=act, p=2), Conv(32, 64, 3, 2, act=act), C3(64, 64, 1, act=act),
                                Conv(64, 128, 3, 2, act=act), C3(128, 128, 2, act=act))  # P3
        self.b1 = nn.Sequential(Conv(128, 256, 3, 2, act=act), C3(256, 256, 3, act=act))  # P4
        self.b2 = nn.Sequential(Conv(256, 512, 3, 2, act=act), C3(512, 512, 1, act=act), SPPF(512, 512, act=act))  # P5
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.l1, self.c1 = Conv(512, 256, 1, act=act), C3(512, 256, 1, False, act)
        self.l2, self.c2 = Conv(256, 128, 1, act=act), C3(256, 128, 1, False, act)
        self.d1, self.c3 = Conv(128, 128, 3, 2, act=act), C3(256, 256, 1, False, act)
        self.d2, self.c4 = Conv(256, 256, 3, 2, act=act), C3(512, 512, 1, False, act)
        self.detect = nn.ModuleList(nn.Conv2d(c, 3 * (5 + nc), 1) for c in (128, 256, 512))

    def forward(self, images):
        p3 = self.b0(images)
        p4 = self.b1(p3)
        p5 = self.b2(p4)
        l1 = self.l1(p5)
        l2 = self.l2(self.c1(torch.cat([self.up(l1), p4], 1)))
        o3 = self.c2(torch.cat([self.up(l2), p3], 1))
        o4 = self.c3(torch.cat([self.d1(o3), l2], 1))
        o5 = self.c4(torch.cat([self.d2(o4), l1], 1))
        return tuple(d(o) for d, o in zip(self.detect, (o3, o4, o5)))


class Focus(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = Conv(4 * cin, cout, 3)

    def forward(self, x):
        return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1))


class SPPBottleneck(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        c = cin // 2
        self.cv1, self.cv2 = Conv(cin, c, 1), Conv(4 * c, cout, 1)
        self.m = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in (5, 9, 13))

    def forward(self, x):
        x = self.cv1(x)
        return self.cv2(torch.cat([x] + [m(x) for m in self.m], 1))


class YOLOXs(nn.Module):
    def __init__(self, nc=80):
        super().__init__()
        self.stem = Focus(3, 32)
        self.dark2 = nn.Sequential(Conv(32, 64, 3, 2), C3(64, 64, 1))
        self.dark3 = nn.Sequential(Conv(64, 128, 3, 2), C3(128, 128, 3))
        self.dark4 = nn.Sequential(Conv(128, 256, 3, 2), C3(256, 256, 3))
        self.dark5 = nn.Sequential(Conv(256, 512, 3, 2), SPPBottleneck(512, 512), C3(512, 512, 1, False))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.lat0, self.c3p4 = Conv(512, 256, 1), C3(512, 256, 1, False)
        self.red1, self.c3p3 = Conv(256, 128, 1), C3(256, 128, 1, False)
        self.bu2, self.c3n3 = Conv(128, 128, 3, 2), C3(256, 256, 1, False)
        self.bu1, self.c3n4 = Conv(256, 256, 3, 2), C3(512, 512, 1, False)
        self.stems = nn.ModuleList(Conv(c, 128, 1) for c in (128, 256, 512))
        self.cls = nn.ModuleList(nn.Sequential(Conv(128, 128, 3), Conv(128, 128, 3), nn.Conv2d(128, nc, 1)) for _ in range(3))
        self.reg = nn.ModuleList(nn.Sequential(Conv(128, 128, 3), Conv(128, 128, 3)) for _ in range(3))
        self.box = nn.ModuleList(nn.Conv2d(128, 4, 1) for _ in range(3))
        self.obj = nn.ModuleList(nn.Conv2d(128, 1, 1) for _ in range(3))

    def forward(self, images):
        d3 = self.dark3(self.dark2(self.stem(images)))
        d4 = self.dark4(d3)
        d5 = self.dark5(d4)
        l0 = self.lat0(d5)
        r1 = self.red1(self.c3p4(torch.cat([self.up(l0), d4], 1)))
        o3 = self.c3p3(torch.cat([self.up(r1), d3], 1))
        o4 = self.c3n3(torch.cat([self.bu2(o3), r1], 1))
        o5 = self.c3n4(torch.cat([self.bu1(o4), l0], 1))
        out = []
        for i, f in enumerate((o3, o4, o5)):
            x = self.stems[i](f)
            r = self.reg[i](x)
            out.append(torch.cat([self.box[i](r), self.obj[i](r).sigmoid(), self.cls[i](x).sigmoid()], 1))
        return tuple(out)


def zoo_models():
    """name -> (module factory, output names), the vendor zoo's table order."""
    dfl = [f"{k}{i}" for i in range(3) for k in ("box", "score", "score_sum")]
    return {
        "yolov5s": (lambda: YOLOv5s("silu"), ["output0", "output1", "output2"]),
        "yolov5s_relu": (lambda: YOLOv5s("relu"), ["output0", "output1", "output2"]),
        "yolov8n": (lambda: YOLOv8((16, 32, 64, 128, 256)), dfl),
        "yolov8s": (lambda: YOLOv8((32, 64, 128, 256, 512)), dfl),
        "yolo11n": (YOLO11n, dfl),
        "yolox_s": (YOLOXs, ["output0", "output1", "output2"]),
        "yolov10n": (YOLOv10n, dfl),
    }
