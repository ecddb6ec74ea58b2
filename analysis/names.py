"""How the analysis names and orders things in its tables, titles and legends: plain text, no plotting."""


def pretty_pair(pair: str) -> str:
    """A framework pair as shown: "torch->linen" as "torch → linen"."""
    return pair.replace("->", " → ")


def capitalised(name: str) -> str:
    """An experiment's name at the start of a title."""
    return name[:1].upper() + name[1:]


def mode_name(framework: str, compile_mode: str) -> str:
    """A framework in one compile mode: "torch/compile"."""
    return f"{framework}/{compile_mode}"


def in_order(order, values) -> list:
    """The members of order found in values (then any others, sorted), so that categories keep a fixed order."""
    values = set(values)
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)
