import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.l(x)).sum(-1)


m = torch.compile(M(), dynamic=False)
for seq in (128, 64, 32):
    m(torch.randn(2, seq, 16))
