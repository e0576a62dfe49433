"""Small vision models written in plain torch (torchvision is not importable beside the CPU
torch wheel here), and planted image stimuli.

``TinyResNet`` follows torchvision's ResNet layout (``stem``, ``layer1``.., ``avgpool``, ``fc``;
BasicBlocks with ``conv1 bn1 relu1 conv2 bn2 relu2`` and a ``downsample`` that is registered
last in its block but runs before the block's sum), so execution order differs from
registration order. ``SharedReluResNet`` reuses one ``relu`` module three times per block, as
torchvision's Bottleneck does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from helpers.tiny_models import tiny_llama, tiny_tokenizer
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.relu2 = nn.ReLU()
        self.downsample = None
        if stride != 1 or channels_in != channels_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride, bias=False),
                nn.BatchNorm2d(channels_out),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        return self.relu2(self.bn2(self.conv2(out)) + identity)


class SharedReluBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, 1, 1)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv2(self.relu(self.conv1(x))) + x)


class TinyResNet(nn.Module):
    """3×16×16 images → 4 classes; two stages of one BasicBlock each, width 8 → 16."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8))
        self.layer1 = nn.Sequential(BasicBlock(8, 8, 1))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class SharedReluResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 1, 1)
        self.layer1 = nn.Sequential(SharedReluBlock(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer1(self.stem(x))


def seeded(build: type[nn.Module], seed: int = 0) -> nn.Module:
    """``build()`` with seeded weights and non-trivial BatchNorm statistics, in eval mode."""
    torch.manual_seed(seed)
    model = build()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def blob_images(
    positions: int = 6, per_position: int = 3, size: int = 16, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Images ``[N, 3, size, size]`` of a bright square at column ``2 * position`` plus noise,
    and each image's position (the stimulus coordinate)."""
    rng = np.random.default_rng(seed)
    images, coordinates = [], []
    for position in range(positions):
        for _ in range(per_position):
            image = rng.normal(0.0, 0.1, (3, size, size))
            image[:, 6:10, 2 * position : 2 * position + 4] += 1.0
            images.append(image)
            coordinates.append(position)
    return np.asarray(images, dtype=np.float32), np.asarray(coordinates)


#: The shape of every tiny vision transformer here (ViT, CLIP's tower): 32×32 px in 8×8 patches,
#: 2 layers, width 32, 4 heads, MLP width 64.
TINY_VISION_TOWER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
}


def tiny_llava(seed: int = 0) -> tuple[Any, Any]:
    """A Llava VLM built from a config (CLIP vision tower 32×32 px, patch 8, width 32; the tiny
    Llama of ``tiny_models`` as its language model) and its processor, whose word-level
    tokenizer also holds the shapes task's words: ``(model, processor)``."""
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tokenizer = tiny_tokenizer()
    tokenizer.add_tokens([w for w in VLM_WORDS if w not in tokenizer.get_vocab()])
    tokenizer.add_tokens([IMAGE_TOKEN], special_tokens=True)
    vision = CLIPVisionConfig(**TINY_VISION_TOWER, projection_dim=32)
    text = tiny_llama()[0].config
    text.vocab_size = len(tokenizer)
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    images = CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        image_token=IMAGE_TOKEN,
    )
    return model, processor


IMAGE_TOKEN = "<image>"
#: The words of the shapes task's prompt and answers.
VLM_WORDS = ("which", "shape", "is", "closest", "to", "the", "red", "cross", "?", ":", "answer")
VLM_WORDS += ("circle", "square", "triangle", "star")
