"""Data-parallel PyTorch training on a pool of two Local nodes with distributed.torch.

Every worker runs ``train`` inside one torch.distributed process group (gloo on CPU, nccl
on GPUs), trains on its own shard of the data through DistributedSampler, and DDP keeps
the replicas identical by averaging gradients.

Run it with:  .venv/bin/python examples/07_pytorch_ddp.py   (needs torch installed; exits 0 without)
"""

from __future__ import annotations

import importlib.util

from _provider import on_cloud, provider

import skyward as sky
from skyward import distributed


@sky.compute
@distributed.torch(backend=None)  # nccl where CUDA is, gloo otherwise
def train(epochs: int) -> tuple[int, float, list[float]]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset

    # nccl moves CUDA tensors only: with it, this worker's GPU (set by distributed.torch)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")

    # the same synthetic data on every worker: y = x @ w + noise
    torch.manual_seed(0)
    x = torch.randn(2048, 8)
    true_w = torch.arange(1.0, 9.0).unsqueeze(1)
    y = x @ true_w + 0.1 * torch.randn(2048, 1)
    dataset = TensorDataset(x.to(device), y.to(device))
    sampler = sky.DistributedSampler(dataset, shuffle=True)  # this worker's half
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)

    model = DistributedDataParallel(torch.nn.Linear(8, 1).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for bx, by in loader:
            loss = torch.nn.functional.mse_loss(model(bx), by)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            total += torch.tensor([loss.item() * len(bx), len(bx)], device=device)
        dist.all_reduce(total)  # the epoch's loss over every worker's samples
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {(total[0] / total[1]).item():.4f}")
    weights = model.module.weight.detach().squeeze().tolist()
    return dist.get_rank(), (total[0] / total[1]).item(), [round(w, 2) for w in weights]


def main() -> None:
    if importlib.util.find_spec("torch") is None and not on_cloud():
        print("torch is not installed here: pip install torch (skipped)")
        return
    image = sky.Image(pip=["torch"]) if on_cloud() else sky.Image()  # Local: this interpreter's torch
    with sky.ComputePool(provider=provider(), image=image, nodes=2, display="log") as pool:
        results = train(5) @ pool  # once on every worker: that is the launch
    for rank, loss, weights in results:
        print(f"rank {rank}: final loss {loss:.4f}, weights {weights}")
    assert results[0][2] == results[1][2], "DDP keeps every replica identical"


if __name__ == "__main__":
    main()
