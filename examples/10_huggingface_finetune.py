"""Fine-tune a Hugging Face model data-parallel with ``distributed.transformers``.

The model is a tiny BERT built from a config in the script (nothing is downloaded), the
data a made-up task: label = whether the first token is above 25. A ``Trainer`` created
inside the function trains data-parallel across the workers; the function returns the
trained weights, and the client uses them.

Needs torch, transformers and accelerate (CPU builds are enough); without them it says so
and exits 0. Run it with:  .venv/bin/python examples/10_huggingface_finetune.py
"""

from __future__ import annotations

import importlib.util
import tempfile

from _provider import on_cloud, provider

import skyward as sky
from skyward import distributed

SAMPLES = 64


def tiny_bert():  # type: ignore[no-untyped-def]
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def dataset():  # type: ignore[no-untyped-def]
    import torch

    ids = torch.randint(1, 50, (SAMPLES, 8), generator=torch.Generator().manual_seed(1))
    labels = (ids[:, 0] > 25).long()
    mask = torch.ones(8, dtype=torch.long)
    return [{"input_ids": ids[k], "attention_mask": mask, "labels": labels[k]} for k in range(SAMPLES)]


@sky.compute
@distributed.transformers(backend="gloo", timeout=120)
def fine_tune(output_dir: str) -> tuple[list[float], dict[str, object]]:
    from transformers import Trainer, TrainingArguments

    info = sky.instance_info()
    model = tiny_bert()
    args = TrainingArguments(
        output_dir=f"{output_dir}/{info.rank}",
        per_device_train_batch_size=8,
        num_train_epochs=4,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset())
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def main() -> None:
    if not all(importlib.util.find_spec(m) for m in ("torch", "transformers", "accelerate")):
        print("torch, transformers and accelerate are not installed here (skipped)")
        return
    import torch

    image = sky.Image(pip=["torch", "transformers", "accelerate"]) if on_cloud() else sky.Image()
    with (
        tempfile.TemporaryDirectory() as out,
        sky.ComputePool(provider=provider(), image=image, nodes=2, display="quiet") as pool,
    ):
        (losses, weights), _ = fine_tune(out) @ pool
    print(f"loss per step on rank 0: {[round(v, 3) for v in losses]}")
    model = tiny_bert()
    model.load_state_dict(weights)  # the remotely trained weights, used here
    batch = dataset()[:8]
    with torch.no_grad():
        logits = model(input_ids=torch.stack([b["input_ids"] for b in batch])).logits
    print(f"predictions here: {logits.argmax(-1).tolist()}, labels: {[int(b['labels']) for b in batch]}")


if __name__ == "__main__":
    main()
