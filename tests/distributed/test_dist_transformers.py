"""distributed.transformers on a real Local pool: a Hugging Face Trainer, on a tiny BERT
built from a config (nothing downloaded), trains data-parallel across two nodes."""

from __future__ import annotations

import os
from typing import Any

import pytest

import skyward as sky
from skyward import distributed

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

pytestmark = [pytest.mark.heavy, pytest.mark.slow]

SAMPLES, BATCH, EPOCHS = 64, 8, 4


@sky.compute
@distributed.transformers(backend="gloo", timeout=120)
def train_tiny_bert(output_dir: str) -> dict[str, Any]:
    import hashlib

    import torch
    import torch.distributed as dist
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    info = sky.instance_info()
    torch.manual_seed(info.rank)  # different inits: DDP must start every rank from rank 0's
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    generator = torch.Generator().manual_seed(1)  # the same full dataset everywhere
    ids = torch.randint(1, 50, (SAMPLES, 8), generator=generator)
    labels = (ids[:, 0] > 25).long()
    dataset = [
        {"input_ids": ids[k], "attention_mask": torch.ones(8, dtype=torch.long), "labels": labels[k]}
        for k in range(SAMPLES)
    ]
    args = TrainingArguments(
        output_dir=os.path.join(output_dir, str(info.rank)),
        per_device_train_batch_size=BATCH,
        num_train_epochs=EPOCHS,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    parameters = b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())
    return {
        "rank": info.rank,
        "initialized": dist.is_initialized(),
        "parallel_mode": str(args.parallel_mode),
        "world_size": args.world_size,
        "process_index": args.process_index,
        "local_process_index": args.local_process_index,
        "device": str(args.device),
        "steps": trainer.state.global_step,
        "losses": losses,
        "digest": hashlib.sha256(parameters).hexdigest(),
    }


@sky.compute
def accelerate_state_after() -> dict[str, Any]:
    import torch.distributed as dist
    from accelerate.state import PartialState

    return {
        "initialized": dist.is_initialized(),
        "partial_state": dict(PartialState._shared_state),
        "env": {n: os.environ.get(n) for n in ("LOCAL_RANK", "RANK", "ACCELERATE_USE_CPU")},
    }


def test_trainer_trains_data_parallel_across_two_nodes(pool2: sky.ComputePool, tmp_path: Any) -> None:
    results = train_tiny_bert(str(tmp_path)) @ pool2

    assert [r["rank"] for r in results] == [0, 1]
    for result in results:
        assert result["initialized"] is True
        assert result["parallel_mode"] == "ParallelMode.DISTRIBUTED"
        assert result["world_size"] == 2
        assert result["process_index"] == result["rank"]
        assert result["local_process_index"] == 0
        assert result["device"].startswith("cpu")
        # each step consumes one batch per rank: half the steps of a single process
        assert result["steps"] == EPOCHS * SAMPLES // (BATCH * 2)
    first, second = results
    assert first["digest"] == second["digest"]  # one model, identical on both ranks
    assert first["losses"][-1] < first["losses"][0]

    # accelerate's singletons and the process group are gone, and the environment too
    for state in accelerate_state_after() @ pool2:
        assert state == {
            "initialized": False,
            "partial_state": {},
            "env": {"LOCAL_RANK": None, "RANK": None, "ACCELERATE_USE_CPU": None},
        }
    # so a second Trainer in the same workers trains the same way from scratch
    again = train_tiny_bert(str(tmp_path)) @ pool2
    assert [r["digest"] for r in again] == [first["digest"]] * 2
