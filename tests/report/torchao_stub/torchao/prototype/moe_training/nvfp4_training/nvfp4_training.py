"""NVFP4TrainingConfig (torchao 0.18.0, nvfp4_training.py:70-99), its name and fields only."""
import dataclasses


@dataclasses.dataclass
class NVFP4TrainingConfig:
    kernel_preference: object = "triton"
    process_group: object = None
    world_size: object = None
    rht_sign_vector: object = None
