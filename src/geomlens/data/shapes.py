"""The seed paper's VLM shapes task, drawn by the code (PIL), nothing downloaded.

Each scene is a white square image with four black shapes, one in each corner, and a red cross
somewhere between them; the question is "which shape is closest to the red cross?". The cross
is the probe, the shapes are the options, and the distance that matters is the Euclidean one
between the cross and each shape's centre, in units of the image side (so scenes of any pixel
size share one scale). Scenes whose nearest and second-nearest shapes are closer in distance
than ``margin`` are redrawn, so every question has one clear answer.

:func:`shapes_task` lays scenes out as data for the behavioural mode of ``similarity``: the
images, the prompt, and the columns ``coordinate`` (the cross), ``options`` (the shape names as
answer tokens), ``option_coordinates`` (the shape centres), ``test`` and ``metric``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SHAPES = ("circle", "square", "triangle", "star")
#: Shape centres, in image-side units: top-left, top-right, bottom-left, bottom-right.
CORNERS = ((0.15, 0.15), (0.85, 0.15), (0.15, 0.85), (0.85, 0.85))
#: Shape radius and cross half-width, in image-side units.
SHAPE_RADIUS = 0.09
CROSS_RADIUS = 0.05
PROMPT = "Which shape is closest to the red cross: circle, square, triangle or star? Answer:"


@dataclass(frozen=True)
class ShapesScene:
    """One scene: the cross position and which shape sits in each corner (see ``CORNERS``)."""

    cross: tuple[float, float]
    corners: tuple[str, str, str, str]

    @property
    def shape_positions(self) -> dict[str, tuple[float, float]]:
        return dict(zip(self.corners, CORNERS))

    def distances(self) -> dict[str, float]:
        """Distance from the cross to each shape's centre (image-side units)."""
        x, y = self.cross
        return {
            shape: float(np.hypot(x - sx, y - sy))
            for shape, (sx, sy) in self.shape_positions.items()
        }

    @property
    def closest(self) -> str:
        distances = self.distances()
        return min(distances, key=distances.__getitem__)

    @property
    def nearest_distance(self) -> float:
        return min(self.distances().values())


def shapes_scenes(count: int, *, seed: int = 0, margin: float = 0.05) -> list[ShapesScene]:
    """``count`` random scenes: shapes shuffled over the corners, the cross anywhere that
    overlaps no shape and leaves one shape closer than the others by at least ``margin``."""
    if count < 1:
        raise ValueError(f"count must be at least 1; got {count}.")
    if not 0 <= margin < 0.5:
        raise ValueError(f"margin must lie in [0, 0.5) (image-side units); got {margin}.")
    rng = np.random.default_rng(seed)
    scenes: list[ShapesScene] = []
    clearance = SHAPE_RADIUS + CROSS_RADIUS
    low, high = CROSS_RADIUS, 1 - CROSS_RADIUS
    while len(scenes) < count:
        corners = tuple(str(s) for s in rng.permutation(SHAPES))
        cross = (float(rng.uniform(low, high)), float(rng.uniform(low, high)))
        scene = ShapesScene(cross, corners)  # type: ignore[arg-type]
        ordered = sorted(scene.distances().values())
        if ordered[0] >= clearance and ordered[1] - ordered[0] >= margin:
            scenes.append(scene)
    return scenes


def draw_scene(scene: ShapesScene, size: int = 224) -> Any:
    """The scene as an RGB PIL image of ``size`` × ``size`` pixels."""
    from PIL import Image, ImageDraw

    if size < 16:
        raise ValueError(f"size must be at least 16 pixels; got {size}.")
    image = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(image)
    radius = SHAPE_RADIUS * size
    for shape, (x, y) in scene.shape_positions.items():
        cx, cy = x * size, y * size
        box = (cx - radius, cy - radius, cx + radius, cy + radius)
        if shape == "circle":
            draw.ellipse(box, fill="black")
        elif shape == "square":
            side = radius * 0.85
            draw.rectangle((cx - side, cy - side, cx + side, cy + side), fill="black")
        elif shape == "triangle":
            draw.polygon(
                [
                    (cx, cy - radius),
                    (cx - radius, cy + radius * 0.8),
                    (cx + radius, cy + radius * 0.8),
                ],
                fill="black",
            )
        else:  # star: five points, alternating outer and inner radius
            angles = np.pi / 2 + np.arange(10) * np.pi / 5
            radii = np.where(np.arange(10) % 2 == 0, radius, radius * 0.45)
            draw.polygon(
                [(cx + r * np.cos(a), cy - r * np.sin(a)) for a, r in zip(angles, radii)],
                fill="black",
            )
    x, y = scene.cross[0] * size, scene.cross[1] * size
    arm, width = CROSS_RADIUS * size, max(1, round(size / 56))
    draw.line((x - arm, y - arm, x + arm, y + arm), fill=(220, 0, 0), width=width)
    draw.line((x - arm, y + arm, x + arm, y - arm), fill=(220, 0, 0), width=width)
    return image


def shapes_task(
    scenes: Sequence[ShapesScene],
    *,
    prompt: str = PROMPT,
    size: int = 224,
    option_prefix: str = " ",
) -> dict[str, Any]:
    """Data for ``similarity`` with ``mode="behavioural"``: one row per scene.

    ``prompt`` is the full text the model reads beside the image (with the model's image
    placeholder or chat template already applied); the answer is scored on the next token,
    option i being ``option_prefix + shape_i``.
    """
    options = [[option_prefix + shape for shape in SHAPES] for _ in scenes]
    positions = [[scene.shape_positions[shape] for shape in SHAPES] for scene in scenes]
    return {
        "images": [draw_scene(scene, size) for scene in scenes],
        "text": [prompt] * len(scenes),
        "coordinate": np.array([scene.cross for scene in scenes]),
        "options": np.array(options),
        "option_coordinates": np.array(positions),
        "test": np.array(["similarity"] * len(scenes)),
        "metric": np.array(["euclidean"] * len(scenes)),
        "nearest_distance": np.array([scene.nearest_distance for scene in scenes]),
    }
