"""Generator/discriminator pairs. See :mod:`ganlab.models.base` for the contract."""

from ganlab.models.base import Discriminator, Generator, has_batch_norm
from ganlab.models.dcgan import DCGANDiscriminator, DCGANGenerator
from ganlab.models.maxout import MaxoutDiscriminator
from ganlab.models.mlp import MLPDiscriminator, MLPGenerator
from ganlab.models.resnet import ResNetDiscriminator, ResNetGenerator

__all__ = ["Generator", "Discriminator", "has_batch_norm", "MLPGenerator", "MLPDiscriminator",
           "DCGANGenerator", "DCGANDiscriminator", "MaxoutDiscriminator",
           "ResNetGenerator", "ResNetDiscriminator"]
