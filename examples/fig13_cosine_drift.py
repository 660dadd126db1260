#!/usr/bin/env python3
"""Godey et al. (2024), Figure 13: the cosine between each head's mean query and mean key
(qk_mean_cosine) across training steps, one panel per layer: one thin line per head and
the layer's mean over heads in bold.

A notebook-style script (`# %%` cells, for Jupyter or VS Code) using the anisoscope
Python client (python/README.md):

    python3 examples/fig13_cosine_drift.py --server 127.0.0.1:50051 --run seed0 \
        --out fig13.png
"""
# %% Settings: command-line flags, or their defaults when run as notebook cells.
import argparse
import math

import matplotlib

matplotlib.use("Agg")  # writes files; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

import anisoscope  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--server", help="HOST:PORT (default: $ANISOSCOPE_SERVER, else "
                    "127.0.0.1:50051); --token etc. come from ANISOSCOPE_TOKEN etc.")
parser.add_argument("--run", default="seed0", help="the run (default seed0)")
parser.add_argument("--probe", help="the probe id (default: the run's only probe)")
parser.add_argument("--out", default="fig13_cosine_drift.png", help="the PNG to write")
args, _ = parser.parse_known_args()  # a notebook kernel passes its own flags

# %% The series: one row per (step, layer, head).
client = anisoscope.Client(args.server)
cosines = client.series(args.run, "qk_mean_cosine", probe=args.probe)
per_head = anisoscope.wide(cosines)          # index step, columns (layer, head)
per_layer = anisoscope.layer_means(cosines)  # index step, one column per layer
per_layer.round(3)  # the table, when run as a notebook cell


# %% One panel per layer.
def short_step(step, _position=None):
    """20000 -> 20k, 1500000 -> 1.5M, as the dashboard's axes."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(step) >= scale:
            return f"{step / scale:g}{suffix}"
    return f"{step:g}"


layers = list(per_layer.columns)
columns = min(4, len(layers))
rows = math.ceil(len(layers) / columns)
figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.6 * rows),
                            sharex=True, sharey=True, squeeze=False)
for axis, layer in zip(axes.flat, layers):
    heads = per_head[layer]
    for head in heads.columns:
        axis.plot(heads.index, heads[head], linewidth=0.8, alpha=0.5, color=f"C{head % 10}")
    axis.plot(per_layer.index, per_layer[layer], linewidth=2.2, color="black", label="mean")
    axis.axhline(0, color="grey", linewidth=0.5)
    axis.set_title(f"layer {layer}", fontsize=10)
    axis.xaxis.set_major_formatter(FuncFormatter(short_step))
for axis in axes.flat[len(layers):]:
    axis.set_visible(False)
for axis in axes[-1]:
    axis.set_xlabel("step")
for axis in axes[:, 0]:
    axis.set_ylabel(r"$\cos(\bar{Q}, \bar{K})$")
axes.flat[0].legend(fontsize=8, loc="best")
figure.suptitle(f"{args.run}: cosine of the mean query and mean key, thin: each head, bold: "
                f"their mean (probe {cosines.attrs['probe_id']})", fontsize=11)
figure.tight_layout()

# %% Save.
figure.savefig(args.out, dpi=120)
print(f"wrote {args.out}: {len(layers)} layers x {per_head.shape[1] // len(layers)} heads, "
      f"{len(per_layer)} steps")
