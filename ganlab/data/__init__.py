"""Data sets held in memory as tensors, and the seeded batch sampler."""

from ganlab.data.base import Batcher, GANData, Mixture
from ganlab.data.cifar import cifar10, find_cifar10
from ganlab.data.image_folder import image_folder
from ganlab.data.images import (
                                digits,
                                fashion_mnist,
                                find_fashion_mnist,
                                mnist,
                                stack,
                                stacked_digits,
                                stacked_fashion_mnist,
)
from ganlab.data.mixtures import grid, ring, sample_mixture

__all__ = ["Batcher", "GANData", "Mixture", "ring", "grid", "sample_mixture", "fashion_mnist", "find_fashion_mnist",
           "digits", "mnist", "cifar10", "find_cifar10", "image_folder", "stack", "stacked_fashion_mnist",
           "stacked_digits"]
