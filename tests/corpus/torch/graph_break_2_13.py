"""Makes graph_break_2_13.log.gz: TORCH_TRACE=dir python graph_break_2_13.py (PyTorch 2.13,
CPU). One frame with two graph breaks: a `print` dynamo cannot trace, and `nonzero`, whose
output shape depends on the data; called for two input sizes."""

import torch


def f(x):
    y = x.relu()
    print("hello")  # a graph break
    z = y.nonzero()  # data-dependent output shape
    return z.float().sum() + y.sum()


g = torch.compile(f)
for n in (8, 16):
    g(torch.randn(n, 4))
