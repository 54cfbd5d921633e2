"""Faster R-CNN (tbd's FasterRCNN/train/batch:N[/height:H/width:W/gt:K]): MXNet's rcnn example
end to end with ResNet-101 v2 as TBD ran it (models/faster_rcnn.h): pre-activation units,
every BatchNorm frozen with eps 2e-5, conv0 and stage 1 frozen; 600x1000 images uniform in
[-1, 1), 100 ground-truth rows per image of which K (default 5) are real random boxes. A step
computes the anchor targets, proposals (decode, clip, min size 16, top 12000,
torchvision.ops.nms 0.7, 2000 kept) and proposal targets (128 RoIs, a quarter foreground) with
vectorised torch ops on the step's device, pools the RoIs with torchvision.ops.roi_pool (14x14
at 1/16), runs stage 4 and the heads, the four losses, backward, element-wise clip 5 and SGD
(lr 0.001, momentum 0.9, weight decay 5e-4). Stored parameters 47,454,565, trained
47,134,367 (asserted).

All boxes are inclusive pixel boxes (IoU with +1); torchvision's nms computes IoU without the
+1, so it gets the boxes with x2 + 1, y2 + 1, which gives the same IoU.

Deviations from tbd: the samplers draw from torch's generator, not tbd's, so the sampled
anchors and RoIs differ (their counts do not). In compile mode the backbone, the RPN head and
the detector head are compiled; the sampling, NMS and RoI pooling stay eager.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import identity, only_params

MODEL = "FasterRCNN"

FRCNN_BN_EPS = 2e-5
# The full configuration, and the tiny one of models/faster_rcnn.cpp's faster_rcnn_tiny(): 64x64
# images, 3 classes, 4 ground-truth rows with one real box, one-unit stages with channels / 4,
# 2 anchors per cell (16 and 32 pixels), 16 anchors and 8 RoIs sampled per image, 4x4 bins.
FRCNN_FULL = dict(image=(600, 1000), classes=21, gt_rows=100, gt=5, stem=64,
                  units=(3, 4, 23, 3), widths=(256, 512, 1024, 2048), rpn=512,
                  scales=(8, 16, 32), ratios=(0.5, 1, 2), stride=16,
                  rpn_batch=256, pre_nms=12000, post_nms=2000, rois=128, pool=14, lr=0.001)
FRCNN_TINY = dict(FRCNN_FULL, image=(64, 64), classes=3, gt_rows=4, gt=1, stem=16,
                  units=(1, 1, 1, 1), widths=(64, 128, 256, 512), rpn=32, scales=(1, 2),
                  ratios=(1,), rpn_batch=16, pre_nms=32, post_nms=16, rois=8, pool=4, lr=0.01)
# MXNet's stored and trained parameters of the full configuration (the models note, 3.3).
FRCNN_PARAMS = 47_454_565
FRCNN_TRAINABLE = 47_134_367
PARAMS = FRCNN_PARAMS


class FrozenBN(nn.Module):
    """MXNet's BatchNorm with use_global_stats (and gamma, beta in FIXED_PARAMS): a fixed
    per-channel affine from the running statistics, eps 2e-5. gamma and beta are stored
    parameters without gradients (counted as MXNet counts them), the statistics buffers.
    torchvision.ops.FrozenBatchNorm2d keeps gamma and beta as buffers and computes the affine
    in two element-wise passes; F.batch_norm in inference mode is one fused pass each way."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(c), requires_grad=False)
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            False, 0.0, FRCNN_BN_EPS)


class PreActUnit(nn.Module):
    """MXNet's residual_unit (bottle_neck=True, ResNet v2): act1 = relu(bn1(x)); 1x1 -> mid,
    BN-ReLU, 3x3 stride s -> mid, BN-ReLU, 1x1 -> out; shortcut x, or a 1x1 stride-s
    convolution of act1 where the unit changes shape. No biases."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        mid = cout // 4
        self.bn1 = FrozenBN(cin)
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn2 = FrozenBN(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn3 = FrozenBN(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.shortcut = (None if cin == cout and stride == 1
                         else nn.Conv2d(cin, cout, 1, stride, bias=False))

    def forward(self, x):
        act1 = F.relu(self.bn1(x))
        y = self.conv2(F.relu(self.bn2(self.conv1(act1))))
        y = self.conv3(F.relu(self.bn3(y)))
        return y + (x if self.shortcut is None else self.shortcut(act1))


def frcnn_stage(cin, cout, units, stride):
    return nn.Sequential(*[PreActUnit(cin if u == 0 else cout, cout, stride if u == 0 else 1)
                           for u in range(units)])


class FasterRCNN(nn.Module):
    """The network of MXNet's rcnn example with ResNet-101 v2 (symbol_resnet.get_resnet_train):
    bn_data, conv0 7x7/2, bn0-ReLU, max pool 3x3/2, stages 1-3 to stride 16 (conv_feat), the
    RPN (3x3 conv + ReLU, 1x1 objectness 2A, 1x1 deltas 4A), and on the pooled RoIs stage 4
    (stride 2 in its first unit), bn1-ReLU, global average pool and the two FCs. conv0,
    bn_data, bn0 and stage 1 are frozen (no weight or data gradients), every BN too."""

    def __init__(self, c):
        super().__init__()
        w = c["widths"]
        anchors = len(c["scales"]) * len(c["ratios"])
        self.bn_data = FrozenBN(3)
        self.conv0 = nn.Conv2d(3, c["stem"], 7, 2, 3, bias=False)
        self.bn0 = FrozenBN(c["stem"])
        self.stage1 = frcnn_stage(c["stem"], w[0], c["units"][0], 1)
        self.stage2 = frcnn_stage(w[0], w[1], c["units"][1], 2)
        self.stage3 = frcnn_stage(w[1], w[2], c["units"][2], 2)
        self.rpn_conv = nn.Conv2d(w[2], c["rpn"], 3, 1, 1)
        self.rpn_cls = nn.Conv2d(c["rpn"], 2 * anchors, 1)
        self.rpn_bbox = nn.Conv2d(c["rpn"], 4 * anchors, 1)
        self.stage4 = frcnn_stage(w[2], w[3], c["units"][3], 2)
        self.bn1 = FrozenBN(w[3])
        self.cls_score = nn.Linear(w[3], c["classes"])
        self.bbox_pred = nn.Linear(w[3], 4 * c["classes"])
        # MXNet's rcnn initialisation of the new layers (the backbone was pretrained).
        for m, std in ((self.rpn_conv, 0.01), (self.rpn_cls, 0.01), (self.rpn_bbox, 0.01),
                       (self.cls_score, 0.01), (self.bbox_pred, 0.001)):
            nn.init.normal_(m.weight, 0.0, std)
            nn.init.zeros_(m.bias)
        for m in (self.bn_data, self.conv0, self.bn0, self.stage1):
            m.requires_grad_(False)

    def features(self, x):
        """conv_feat (N, widths[2], H/16, W/16)."""
        y = F.relu(self.bn0(self.conv0(self.bn_data(x))))
        y = F.max_pool2d(y, 3, 2, 1)
        return self.stage3(self.stage2(self.stage1(y)))

    def rpn(self, feat):
        """Objectness logits (N, 2A, H, W), channels 0..A-1 background of anchor a, A..2A-1
        foreground; deltas (N, 4A, H, W), channel 4a + k."""
        h = F.relu(self.rpn_conv(feat))
        return self.rpn_cls(h), self.rpn_bbox(h)

    def head(self, pooled):
        h = F.relu(self.bn1(self.stage4(pooled))).mean((2, 3))
        return self.cls_score(h), self.bbox_pred(h)


def frcnn_anchors(stride, scales, ratios, feat_h, feat_w):
    """py-faster-rcnn's generate_anchors (base box 0..stride-1; ratio enumeration with its
    round-half-to-even, then scales), shifted by `stride` over the feature map. Returns
    (A*H*W, 4) float32 (x1, y1, x2, y2) in the (a, h, w) order."""
    size = float(stride * stride)
    ctr = 0.5 * (stride - 1)
    base = []
    for r in ratios:
        ws = round(math.sqrt(size / r))
        hs = round(ws * r)
        for s in scales:
            w, h = ws * s, hs * s
            base.append([ctr - 0.5 * (w - 1), ctr - 0.5 * (h - 1),
                         ctr + 0.5 * (w - 1), ctr + 0.5 * (h - 1)])
    base = torch.tensor(base, dtype=torch.float64)
    sy, sx = torch.meshgrid(torch.arange(feat_h, dtype=torch.float64) * stride,
                            torch.arange(feat_w, dtype=torch.float64) * stride, indexing="ij")
    shifts = torch.stack([sx, sy, sx, sy], 2)  # (H, W, 4)
    return (base[:, None, None, :] + shifts[None]).reshape(-1, 4).float()


def box_iou_plus1(a, b):
    """IoU matrix (len(a), len(b)) of inclusive pixel boxes (width = x2 - x1 + 1)."""
    area_a = (a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)
    area_b = (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)
    iw = (torch.min(a[:, None, 2], b[None, :, 2]) - torch.max(a[:, None, 0], b[None, :, 0])
          + 1).clamp(min=0)
    ih = (torch.min(a[:, None, 3], b[None, :, 3]) - torch.max(a[:, None, 1], b[None, :, 1])
          + 1).clamp(min=0)
    inter = iw * ih
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def bbox_encode(ex, gt):
    """py-faster-rcnn's bbox_transform: (dx, dy, dw, dh) of gt relative to ex."""
    ew, eh = ex[:, 2] - ex[:, 0] + 1, ex[:, 3] - ex[:, 1] + 1
    gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
    return torch.stack([(gt[:, 0] + 0.5 * gw - ex[:, 0] - 0.5 * ew) / ew,
                        (gt[:, 1] + 0.5 * gh - ex[:, 1] - 0.5 * eh) / eh,
                        torch.log(gw / ew), torch.log(gh / eh)], 1)


def bbox_decode(boxes, d):
    """MXNet's Proposal op (BBoxTransformInv): the exact inverse of bbox_encode."""
    w, h = boxes[:, 2] - boxes[:, 0] + 1, boxes[:, 3] - boxes[:, 1] + 1
    cx, cy = boxes[:, 0] + 0.5 * (w - 1), boxes[:, 1] + 0.5 * (h - 1)
    pcx, pcy = d[:, 0] * w + cx, d[:, 1] * h + cy
    pw, ph = torch.exp(d[:, 2]) * w, torch.exp(d[:, 3]) * h
    return torch.stack([pcx - 0.5 * (pw - 1), pcy - 0.5 * (ph - 1),
                        pcx + 0.5 * (pw - 1), pcy + 0.5 * (ph - 1)], 1)


def frcnn_synthetic_gt(n, rows, real, image, classes, gen):
    """(n, rows, 5) ground truth: `real` random boxes per image inside the image (integer
    pixel corners, sides 32 px to half the image), classes in [1, classes); the other rows
    padding (every field -1)."""
    h, w = image
    gt = torch.full((n, rows, 5), -1.0)
    if real == 0:
        return gt
    bw = 32 + torch.rand(n, real, generator=gen) * (w / 2 - 32)
    bh = 32 + torch.rand(n, real, generator=gen) * (h / 2 - 32)
    x1 = (torch.rand(n, real, generator=gen) * (w - bw)).floor()
    y1 = (torch.rand(n, real, generator=gen) * (h - bh)).floor()
    gt[:, :real, 0], gt[:, :real, 1] = x1, y1
    gt[:, :real, 2], gt[:, :real, 3] = x1 + bw.floor() - 1, y1 + bh.floor() - 1
    gt[:, :real, 4] = torch.randint(1, classes, (n, real), generator=gen).float()
    return gt


def sample_down(mask_idx, keep, gen):
    """Indices of mask_idx beyond a random `keep` of them (to be disabled)."""
    if mask_idx.numel() <= keep:
        return mask_idx[:0]
    perm = torch.randperm(mask_idx.numel(), generator=gen, device=gen.device)
    return mask_idx[perm[keep:].to(mask_idx.device)]


@torch.no_grad()
def frcnn_anchor_targets(anchors, gt, c, feat_hw, gen):
    """MXNet's AnchorLoader assign_anchor on the device: labels (N, A*H*W) int64 in {-1, 0, 1},
    bbox targets and weights (N, 4A, H, W) (channel 4a + k)."""
    n = gt.shape[0]
    img_h, img_w = c["image"]
    fh, fw = feat_hw
    k_all = anchors.shape[0]
    a = k_all // (fh * fw)
    inside = ((anchors[:, 0] >= 0) & (anchors[:, 1] >= 0) & (anchors[:, 2] < img_w)
              & (anchors[:, 3] < img_h)).nonzero()[:, 0]
    ins = anchors[inside]
    labels = torch.full((n, k_all), -1, dtype=torch.long, device=anchors.device)
    targets = torch.zeros(n, k_all, 4, device=anchors.device)
    weights = torch.zeros(n, k_all, 4, device=anchors.device)
    fg_max = int(c["rpn_batch"] * 0.5)
    for i in range(n):
        g = gt[i][gt[i, :, 4] >= 0, :4]
        lab = torch.zeros(ins.shape[0], dtype=torch.long, device=anchors.device)
        if g.shape[0]:
            ov = box_iou_plus1(ins, g)  # (inside anchors, G)
            max_ov, argmax = ov.max(1)
            gt_max = ov.max(0).values
            lab.fill_(-1)
            lab[max_ov < 0.3] = 0
            # The best anchors of each gt box (ties included), as py-faster-rcnn; a box that
            # overlaps no anchor at all has none.
            lab[((ov == gt_max[None]) & (ov > 0)).any(1)] = 1
            lab[max_ov >= 0.7] = 1
        lab[sample_down((lab == 1).nonzero()[:, 0], fg_max, gen)] = -1
        bg_keep = c["rpn_batch"] - int((lab == 1).sum())
        lab[sample_down((lab == 0).nonzero()[:, 0], bg_keep, gen)] = -1
        labels[i, inside] = lab
        if g.shape[0]:
            pos = (lab == 1).nonzero()[:, 0]
            targets[i, inside[pos]] = bbox_encode(ins[pos], g[argmax[pos]])
            weights[i, inside[pos]] = 1.0

    def to_map(t):  # (N, A*H*W, 4) in (a, h, w) order -> (N, 4A, H, W), channel 4a + k
        return t.view(n, a, fh, fw, 4).permute(0, 1, 4, 2, 3).reshape(n, 4 * a, fh, fw)

    return labels, to_map(targets), to_map(weights)


@torch.no_grad()
def frcnn_proposals(cls, deltas, anchors, c):
    """MXNet's Proposal op: per image, decode the deltas on the anchors, clip to the image,
    drop boxes under 16 px a side, the top pre_nms by score (fg - bg logit, monotone in the
    softmax), torchvision's NMS at 0.7 (on boxes with x2, y2 + 1, which makes its IoU the
    inclusive one), keep post_nms, padded by repeating cyclically. Returns (N*post_nms, 5)."""
    n, a2, fh, fw = cls.shape
    a = a2 // 2
    img_h, img_w = c["image"]
    score = (cls[:, a:] - cls[:, :a]).reshape(n, -1)
    d = deltas.view(n, a, 4, fh, fw).permute(0, 1, 3, 4, 2).reshape(n, -1, 4)
    out = []
    for i in range(n):
        b = bbox_decode(anchors, d[i])
        b = torch.stack([b[:, 0].clamp(0, img_w - 1), b[:, 1].clamp(0, img_h - 1),
                         b[:, 2].clamp(0, img_w - 1), b[:, 3].clamp(0, img_h - 1)], 1)
        big = ((b[:, 2] - b[:, 0] + 1 >= 16) & (b[:, 3] - b[:, 1] + 1 >= 16)).nonzero()[:, 0]
        if big.numel() == 0:  # nothing survives: the whole image, as one proposal
            b, s = b.new_tensor([[0, 0, img_w - 1, img_h - 1]]), score.new_ones(1)
        else:
            b, s = b[big], score[i, big]
        s, order = s.topk(min(c["pre_nms"], s.numel()))
        b = b[order]
        shifted = torch.cat([b[:, :2], b[:, 2:] + 1], 1)
        keep = torchvision_ops().nms(shifted, s, 0.7)[:c["post_nms"]]
        if keep.numel() < c["post_nms"]:
            keep = keep.repeat(-(-c["post_nms"] // keep.numel()))[:c["post_nms"]]
        out.append(torch.cat([b.new_full((keep.numel(), 1), float(i)), b[keep]], 1))
    return torch.cat(out)


@torch.no_grad()
def frcnn_proposal_targets(rois, gt, c, gen):
    """MXNet's proposal_target op: per image the gt boxes appended to its RoIs, foreground
    IoU >= 0.5 (at most a quarter of the RoIs, sampled), background [0, 0.5) filling the rest
    (repeated when too few), labels, and box targets / (0.1, 0.1, 0.2, 0.2) in the 4 columns of
    the class with weights 1 there. Returns rois (N*R, 5), labels (N*R), targets and weights
    (N*R, 4*classes)."""
    n = gt.shape[0]
    per, classes = c["rois"], c["classes"]
    fg_max = round(0.25 * per)
    stds = rois.new_tensor([0.1, 0.1, 0.2, 0.2])
    dev = rois.device
    post = rois.shape[0] // n
    out_rois, out_lab, out_t, out_w = [], [], [], []
    for i in range(n):
        g = gt[i][gt[i, :, 4] >= 0]
        r = torch.cat([rois[i * post:(i + 1) * post, 1:], g[:, :4]])
        if g.shape[0]:
            max_ov, assign = box_iou_plus1(r, g[:, :4]).max(1)
            lab = g[assign, 4].long()
        else:
            max_ov = r.new_zeros(r.shape[0])
            assign = torch.zeros(r.shape[0], dtype=torch.long, device=dev)
            lab = assign.clone()
        fg = (max_ov >= 0.5).nonzero()[:, 0]
        bg = ((max_ov < 0.5) & (max_ov >= 0)).nonzero()[:, 0]
        nfg = min(fg_max, fg.numel())
        fg = fg[torch.randperm(fg.numel(), generator=gen, device=gen.device)[:nfg].to(dev)]
        pool = bg if bg.numel() else fg  # (no background at all: repeat foreground)
        keep = [fg]
        have = nfg
        while have < per:
            take = min(pool.numel(), per - have)
            keep.append(pool[torch.randperm(pool.numel(), generator=gen,
                                            device=gen.device)[:take].to(dev)])
            have += take
        keep = torch.cat(keep)
        lab = lab[keep]
        lab[nfg:] = 0
        t = bbox_encode(r[keep], g[assign[keep], :4]) / stds if g.shape[0] else None
        tgt = r.new_zeros(per, 4 * classes)
        wgt = r.new_zeros(per, 4 * classes)
        rows = (lab > 0).nonzero()[:, 0]
        if rows.numel():
            cols = lab[rows, None] * 4 + torch.arange(4, device=dev)
            tgt[rows[:, None], cols] = t[rows]
            wgt[rows[:, None], cols] = 1.0
        out_rois.append(torch.cat([r.new_full((per, 1), float(i)), r[keep]], 1))
        out_lab.append(lab)
        out_t.append(tgt)
        out_w.append(wgt)
    return torch.cat(out_rois), torch.cat(out_lab), torch.cat(out_t), torch.cat(out_w)


def torchvision_ops():
    import torchvision
    return torchvision.ops


def setup(n, params=None, tiny=False, device="cpu", wrap=None, seed=0):
    """Faster R-CNN at n images per step: the network, its synthetic batch (images uniform in
    [-1, 1), `num_gt` real boxes of 100 ground-truth rows per image), SGD (lr 0.001, momentum
    0.9, weight decay 5e-4) over the trainable parameters, and the training step: anchor
    targets, forward, proposals + NMS, proposal targets, RoI max pooling (torchvision's
    roi_pool, 14x14 at 1/16), the four losses, backward, element-wise clip 5, update,
    zero_grad. Weights and data are drawn on the CPU (seed 0) and moved; the sampling draws
    from a seeded generator on the device. The step's no-grad detection parts are timed
    (synchronised on CUDA) into det_s: one dict per step run. Returns a dict: net, step,
    config, params, trainable, det_s, gt, and the common fields (peers/common.py). The name's
    height:, width: and gt: set the image size and the real boxes per image."""
    only_params(MODEL, params, ("height", "width", "gt"))
    params = params or {}
    wrap = wrap or identity
    c = dict(FRCNN_TINY if tiny else FRCNN_FULL)
    c["image"] = (int(params.get("height", c["image"][0])), int(params.get("width", c["image"][1])))
    num_gt = int(params.get("gt", c["gt"]))
    if not 0 <= num_gt <= c["gt_rows"]:
        raise ValueError(f"{MODEL}: gt:{num_gt} is not in [0, {c['gt_rows']}] (the ground-truth "
                         "rows per image)")
    ops = torchvision_ops()
    torch.manual_seed(seed)
    net = FasterRCNN(c)
    params = sum(p.numel() for p in net.parameters())
    trainable = [p for p in net.parameters() if p.requires_grad]
    ntrain = sum(p.numel() for p in trainable)
    if not tiny:
        assert params == FRCNN_PARAMS and ntrain == FRCNN_TRAINABLE, (params, ntrain)
    net.to(device).train()  # every BN is frozen whatever the mode
    opt = torch.optim.SGD(trainable, lr=c["lr"], momentum=0.9, weight_decay=5e-4)
    gen_cpu = torch.Generator().manual_seed(seed)
    img_h, img_w = c["image"]
    x = (torch.rand(n, 3, img_h, img_w, generator=gen_cpu) * 2 - 1).to(device)
    gt = frcnn_synthetic_gt(n, c["gt_rows"], num_gt, c["image"], c["classes"], gen_cpu).to(device)
    fh, fw = img_h, img_w  # conv_feat: conv0, the max pool, stage 2's and stage 3's 3x3
    for k, st, p in ((7, 2, 3), (3, 2, 1), (3, 2, 1), (3, 2, 1)):
        fh, fw = (fh + 2 * p - k) // st + 1, (fw + 2 * p - k) // st + 1
    anchors = frcnn_anchors(c["stride"], c["scales"], c["ratios"], fh, fw).to(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    cuda = torch.device(device).type == "cuda"
    det_s = []
    last = {}
    features, rpn, head = wrap(net.features), wrap(net.rpn), wrap(net.head)

    def tick():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def frcnn_step():
        t = {}
        t0 = tick()
        rpn_labels, rpn_t, rpn_w = frcnn_anchor_targets(anchors, gt, c, (fh, fw), gen)
        t["anchor_targets"] = tick() - t0
        feat = features(x)
        rpn_cls, rpn_bbox = rpn(feat)
        t0 = tick()
        rois = frcnn_proposals(rpn_cls.detach(), rpn_bbox.detach(), anchors, c)
        t["proposals_nms"] = tick() - t0
        t0 = tick()
        rois, labels, bbox_t, bbox_w = frcnn_proposal_targets(rois, gt, c, gen)
        t["proposal_targets"] = tick() - t0
        pooled = ops.roi_pool(feat, rois, (c["pool"], c["pool"]), 1.0 / c["stride"])
        cls_score, bbox_pred = head(pooled)
        a = rpn_cls.shape[1] // 2
        rpn_cls_loss = F.cross_entropy(rpn_cls.view(n, 2, a * fh * fw), rpn_labels,
                                       ignore_index=-1)
        rpn_box_loss = (F.smooth_l1_loss(rpn_bbox, rpn_t, reduction="none", beta=1.0 / 9)
                        * rpn_w).sum() / (c["rpn_batch"] * n)
        cls_loss = F.cross_entropy(cls_score, labels)
        box_loss = (F.smooth_l1_loss(bbox_pred, bbox_t, reduction="none", beta=1.0)
                    * bbox_w).sum() / (c["rois"] * n)
        parts = (rpn_cls_loss, rpn_box_loss, cls_loss, box_loss)
        loss = sum(parts)
        loss.backward()
        nn.utils.clip_grad_value_(trainable, 5.0)  # MXNet's clip_gradient: element-wise
        opt.step()
        opt.zero_grad(set_to_none=False)
        det_s.append(t)
        last["losses"] = dict(zip(("rpn_cls", "rpn_bbox", "rcnn_cls", "rcnn_bbox"),
                                  (v.item() for v in parts)))
        return loss.item()

    return {"net": net, "nets": [net], "step": frcnn_step, "config": c, "params": params,
            "trainable": ntrain, "det_s": det_s, "last": last, "gt": gt, "feature": (fh, fw),
            "per_step": {"items": n, "rois": n * c["rois"]}}
