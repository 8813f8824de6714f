"""torchao.float8's training entry points, as far as names and arguments go (README.md)."""
import enum

CONVERTED = []  # (fqn, recipe name) of every module converted: what the test reads


class Float8LinearRecipeName(enum.Enum):  # torchao/float8/config.py
    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    ROWWISE_WITH_GW_HP = "rowwise_with_gw_hp"


class Float8LinearConfig:
    def __init__(self, recipe="tensorwise"):
        self.recipe = recipe

    @staticmethod
    def from_recipe_name(recipe_name):
        if isinstance(recipe_name, Float8LinearRecipeName):
            recipe_name = recipe_name.value
        valid_names = [n.value for n in Float8LinearRecipeName]
        assert recipe_name in valid_names, \
            f"recipe_name {recipe_name} not in valid names {valid_names}"
        return Float8LinearConfig(recipe_name)


def convert_to_float8_training(module, *, module_filter_fn=None, config=None):
    if config is None:
        config = Float8LinearConfig()
    for fqn, m in module.named_modules():
        if hasattr(m, "in_features") and hasattr(m, "out_features") and \
                (module_filter_fn is None or module_filter_fn(m, fqn)):
            CONVERTED.append((fqn, config.recipe))
    return module
