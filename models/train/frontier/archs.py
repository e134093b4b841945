"""Candidate layouts (constructors only)."""
from common import *


def seq(*layers):
    return nn.Sequential(*layers)


def head(c, fc, dropout=0.2):
    if fc:
        return [nn.Flatten(), nn.Dropout(dropout), Linear(c, fc), nn.ReLU(inplace=True), nn.Dropout(dropout), Linear(fc, 10)]
    return [nn.Flatten(), nn.Dropout(dropout), Linear(c, 10)]


ARCHS = {
    # ---- MLPs (<= ~26 us)
    "mlp_gelu": lambda: mlp([784, 256, 128, 10], "gelu", 0.2),
    "mlp_tanh": lambda: mlp([784, 192, 192, 10], "tanh", 0.1),
    "mlp_silu3": lambda: mlp([784, 224, 128, 64, 10], "silu", 0.1),
    "mlp_p14": lambda: mlp([196, 512, 256, 10], "relu", 0.2, pre=Pool2()),
    "mlp_wide1": lambda: mlp([784, 300, 10], "relu", 0.3),
    # ---- tiny strided CNNs
    "cs_8_16": lambda: seq(*cbr(1, 8, 3, 2), *cbr(8, 16, 3, 2), *head(16 * 49, 0)),
    "cs_16_32": lambda: seq(*cbr(1, 16, 3, 2), *cbr(16, 32, 3, 2), *head(32 * 49, 0)),
    "cs_16_32_fc": lambda: seq(*cbr(1, 16, 3, 2), *cbr(16, 32, 3, 2), *head(32 * 49, 64)),
    "cs5_16_32": lambda: seq(*cbr(1, 16, 5, 2), *cbr(16, 32, 3, 2), *head(32 * 49, 0)),
    "cs_24_48": lambda: seq(*cbr(1, 24, 3, 2), *cbr(24, 48, 3, 2), *head(48 * 49, 0)),
    "cs_32_64": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 64, 3, 2), *head(64 * 49, 0)),
    "cs_32_64_fc": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 64, 3, 2), *head(64 * 49, 128)),
    "p14_32": lambda: seq(Pool2(), *cbr(1, 32, 3), nn.MaxPool2d(2), *head(32 * 49, 64)),
    "p14_32_64": lambda: seq(Pool2(), *cbr(1, 32, 3), *cbr(32, 64, 3, 2), *head(64 * 49, 0)),
    "w1_16": lambda: seq(*cbr(1, 16, 5), nn.MaxPool2d(4), *head(16 * 49, 128)),
    "w1_32": lambda: seq(*cbr(1, 32, 5), nn.MaxPool2d(4), *head(32 * 49, 128)),
    "w1_32k3": lambda: seq(*cbr(1, 32, 3), nn.MaxPool2d(4), *head(32 * 49, 128)),
    "pool_16_32": lambda: seq(*cbr(1, 16, 3), nn.MaxPool2d(2), *cbr(16, 32, 3), nn.MaxPool2d(2), *head(32 * 49, 0)),
    "pool_16_32_fc": lambda: seq(*cbr(1, 16, 3), nn.MaxPool2d(2), *cbr(16, 32, 3), nn.MaxPool2d(2), *head(32 * 49, 128)),
    "dil_16_32": lambda: seq(*cbr(1, 16, 3, 2), *cbr(16, 32, 3, 1, d=2), nn.MaxPool2d(2), *head(32 * 49, 0)),
    "dw_s": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 32, 3, 1, g=32), *cbr(32, 64, 1), *cbr(64, 64, 3, 2, g=64), *cbr(64, 128, 1), *head(128 * 49, 0)),
    "cs3_16_32_64": lambda: seq(*cbr(1, 16, 3, 2), *cbr(16, 32, 3, 2), *cbr(32, 64, 3, 1), *head(64 * 49, 0)),
    "cs_32_64_64": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 64, 3, 2), *cbr(64, 64, 3), *head(64 * 49, 0)),
    "vggl": lambda: seq(*cbr(1, 32, 3), *cbr(32, 32, 3), nn.MaxPool2d(2), *cbr(32, 64, 3), nn.MaxPool2d(2), *head(64 * 49, 0)),
    "c2_32_64": lambda: seq(*cbr(1, 32, 3), nn.MaxPool2d(2), *cbr(32, 64, 3), nn.MaxPool2d(2), *head(64 * 49, 0)),
}


class Res(nn.Module):
    def __init__(self, c, d=1):
        super().__init__()
        self.body = nn.Sequential(*cbr(c, c, 3, d=d), nn.Conv2d(c, c, 3, 1, d, dilation=d, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return F.relu(self.body(x) + x)


ARCHS.update({
    "cs_48_96": lambda: seq(*cbr(1, 48, 3, 2), *cbr(48, 96, 3, 2), *head(96 * 49, 0)),
    "cs_32_64_128": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 64, 3, 2), *cbr(64, 128, 3, 2), *head(128 * 16, 0)),
    "cs_16_32_64s": lambda: seq(*cbr(1, 16, 3, 2), *cbr(16, 32, 3, 2), *cbr(32, 64, 3, 2), *head(64 * 16, 0)),
    "res_s": lambda: seq(*cbr(1, 32, 3, 2), Res(32), *cbr(32, 64, 3, 2), *head(64 * 49, 0)),
    "res_t": lambda: seq(*cbr(1, 16, 3, 2), Res(16), *cbr(16, 32, 3, 2), *head(32 * 49, 0)),
    "res_m": lambda: seq(*cbr(1, 24, 3, 2), Res(24), *cbr(24, 48, 3, 2), Res(48), *head(48 * 49, 0)),
    "cs5_32_64": lambda: seq(*cbr(1, 32, 5, 2), *cbr(32, 64, 5, 2), *head(64 * 49, 0)),
    "cs_64_64": lambda: seq(*cbr(1, 64, 3, 2), *cbr(64, 64, 3, 2), *head(64 * 49, 0)),
    "dw_m": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 32, 3, g=32), *cbr(32, 96, 1), *cbr(96, 96, 3, 2, g=96), *cbr(96, 192, 1), *cbr(192, 192, 3, g=192), *cbr(192, 128, 1), *head(128 * 49, 0)),
    "p14_48_96": lambda: seq(Pool2(), *cbr(1, 48, 3), *cbr(48, 96, 3, 2), *head(96 * 49, 0)),
    "gap_32_64_128": lambda: seq(*cbr(1, 32, 3, 2), *cbr(32, 64, 3), *cbr(64, 128, 3, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), Linear(128, 10)),
})
