"""torchao 0.18.0's nvfp4_training package: its __init__ holds only a docstring."""
