"""pandas and numpy views of query responses, and helpers that reshape a series frame.

A series frame is long: one row per point, columns step, layer, head, value (int64,
int64, int64, float64), ordered by layer, head, step. For metrics that are not per head
(the catalogue's scope, Client.metrics()) head is -1, as on the wire: an integer column
rather than a missing value, so that groupby and pivot keep those rows.
"""
import numbers
import operator
from typing import NamedTuple

import numpy as np
import pandas as pd

SERIES_COLUMNS = ["step", "layer", "head", "value"]
TRAJECTORY_COLUMNS = ["step", "q_x", "q_y", "k_x", "k_y"]
TOKEN_CLOUD_COLUMNS = ["step", "token", "q_x", "q_y", "k_x", "k_y"]
CORRELATION_COLUMNS = ["step", "hidden_states", "spearman_rho", "spearman_p", "pearson_r",
                       "pearson_p"]
METRIC_COLUMNS = ["name", "scope", "kind", "group", "families", "token_sample", "derived",
                  "may_be_undefined", "baseline", "label", "unit", "definition", "meaning"]
ALARM_COLUMNS = ["id", "namespace", "run", "probe_id", "rule", "metric", "layer", "step", "value",
                 "reference", "state", "resolved_step", "fired_at", "resolved_at", "severity",
                 "summary", "revision"]


class Vectors(NamedTuple):
    """One head's mean vectors: steps, int64 [n]; values, float64 [n, head_dim] (row i is
    the vector at steps[i]; shape (0, 0) when no step matched)."""
    steps: np.ndarray
    values: np.ndarray


def selection(value, name):
    """None (everything), or the frozenset of ints that an int or an iterable names."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral):
        return frozenset([int(value)])
    chosen = frozenset(operator.index(v) for v in value)
    if not chosen:
        raise ValueError(f"{name}: empty selection")
    return chosen


def series_frame(points):
    """The long frame of repeated SeriesPoint `points`."""
    return pd.DataFrame({
        "step": np.array([p.step for p in points], dtype=np.int64),
        "layer": np.array([p.layer for p in points], dtype=np.int64),
        "head": np.array([p.head for p in points], dtype=np.int64),
        "value": np.array([p.value for p in points], dtype=np.float64),
    }, columns=SERIES_COLUMNS)


def metrics_frame(metrics):
    """The catalogue frame of repeated MetricInfo `metrics`: one row each, METRIC_COLUMNS."""
    return pd.DataFrame([[getattr(m, column) for column in METRIC_COLUMNS] for m in metrics],
                        columns=METRIC_COLUMNS)


def vectors_arrays(points):
    """Vectors of repeated VectorPoint `points`."""
    steps = np.array([p.step for p in points], dtype=np.int64)
    if not points:
        return Vectors(steps, np.empty((0, 0)))
    return Vectors(steps, np.array([list(p.values) for p in points], dtype=np.float64))


def trajectory_frame(points):
    """Columns step, q_x, q_y, k_x, k_y of repeated TrajectoryPoint `points`."""
    return pd.DataFrame({
        "step": np.array([p.step for p in points], dtype=np.int64),
        **{name: np.array([getattr(p, name) for p in points], dtype=np.float64)
           for name in TRAJECTORY_COLUMNS[1:]},
    }, columns=TRAJECTORY_COLUMNS)


def token_cloud_frame(steps):
    """Columns step, token, q_x, q_y, k_x, k_y of repeated TokenCloudStep `steps`: one row
    per step and sampled token."""
    counts = [len(cloud.q_x) for cloud in steps]
    return pd.DataFrame({
        "step": np.repeat(np.array([c.step for c in steps], dtype=np.int64), counts),
        "token": np.concatenate([np.arange(n, dtype=np.int64) for n in counts] or
                                [np.empty(0, dtype=np.int64)]),
        **{name: np.array([x for cloud in steps for x in getattr(cloud, name)],
                          dtype=np.float64) for name in TOKEN_CLOUD_COLUMNS[2:]},
    }, columns=TOKEN_CLOUD_COLUMNS)


def correlation_frame(points):
    """Columns CORRELATION_COLUMNS of repeated CorrelationPoint `points`."""
    return pd.DataFrame({
        "step": np.array([p.step for p in points], dtype=np.int64),
        "hidden_states": np.array([p.hidden_states for p in points], dtype=np.int64),
        **{name: np.array([getattr(p, name) for p in points], dtype=np.float64)
           for name in CORRELATION_COLUMNS[2:]},
    }, columns=CORRELATION_COLUMNS)


def alarms_frame(alarms, state_word):
    """Columns ALARM_COLUMNS of repeated Alarm `alarms`, one row per alarm.

    layer stays -1 for a rule over every layer (as on the wire, so that the column stays
    int64); state is state_word(alarm.state) ("firing", "resolved"); resolved_step is a
    nullable Int64, <NA> while firing; fired_at and resolved_at are UTC timestamps, NaT while
    firing.
    """
    def ints(name):
        return np.array([getattr(a, name) for a in alarms], dtype=np.int64)

    def texts(name):
        return [getattr(a, name) for a in alarms]

    def times(name):
        return pd.to_datetime(pd.Series([getattr(a, name) or None for a in alarms],
                                        dtype=object), utc=True)

    return pd.DataFrame({
        "id": ints("id"), "namespace": texts("namespace"), "run": texts("run"),
        "probe_id": texts("probe_id"), "rule": texts("rule"), "metric": texts("metric"),
        "layer": ints("layer"), "step": ints("step"),
        "value": np.array([a.value for a in alarms], dtype=np.float64),
        "reference": np.array([a.reference for a in alarms], dtype=np.float64),
        "state": [state_word(a.state) for a in alarms],
        "resolved_step": pd.array([a.resolved_step if a.HasField("resolved_step") else None
                                   for a in alarms], dtype="Int64"),
        "fired_at": times("fired_at"), "resolved_at": times("resolved_at"),
        "severity": texts("severity"), "summary": texts("summary"),
        "revision": ints("revision"),
    }, columns=ALARM_COLUMNS)


def wide(series):
    """A series frame as a table: index step, columns the (layer, head) MultiIndex."""
    return series.pivot(index="step", columns=["layer", "head"], values="value").sort_index(axis=1)


def layer_means(series):
    """The mean over each layer's heads: index step, one column per layer."""
    return series.groupby(["step", "layer"])["value"].mean().unstack("layer")
