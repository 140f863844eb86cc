"""The curve-with-band plot (attnsvm.book.plot.curves): which line and band it draws, and bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

import numpy as np
import pytest

from attnsvm.book import plot


def _drawn(band, center=None):
    """The line's y values and the band's (low, high) edges that ``curves`` draws."""
    steps = np.arange(3)
    values = np.array([[np.nan] * 4, [1.0, 2.0, 3.0, 10.0], [0.0, 4.0, 4.0, 8.0]])
    fig, ax = plt.subplots()
    plot.curves(ax, steps, values, band=band, center=center)
    line = ax.get_lines()[0]
    edges = None
    if ax.collections:
        vertices = ax.collections[0].get_paths()[0].vertices
        ys = vertices[:, 1]
        edges = (ys.min(), ys.max())
    plt.close(fig)
    return line.get_xdata(), line.get_ydata(), edges


def test_all_nan_steps_are_dropped_and_the_default_is_mean_with_range():
    x, y, edges = _drawn(True)
    assert list(x) == [1, 2]                        # step 0 (all NaN) is not drawn
    np.testing.assert_allclose(y, [4.0, 4.0])       # means of the two rows
    assert edges == (0.0, 10.0)                     # min over both rows, max over both rows


def test_iqr_band_is_the_median_and_the_quartiles():
    _, y, edges = _drawn("iqr")
    np.testing.assert_allclose(y, [2.5, 4.0])       # medians
    q = np.percentile([[1.0, 2.0, 3.0, 10.0], [0.0, 4.0, 4.0, 8.0]], [25, 75], axis=1)
    assert edges == pytest.approx((q[0].min(), q[1].max()))
    assert edges[1] < 10.0                          # the outlier 10 is outside the IQR band


def test_center_overrides_the_line_and_no_band_draws_none():
    _, y, edges = _drawn(False, center="median")
    np.testing.assert_allclose(y, [2.5, 4.0])
    assert edges is None


@pytest.mark.parametrize("band, center", [("quartiles", None), (True, "mode")])
def test_unknown_band_or_center_raises(band, center):
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="band|center"):
        plot.curves(ax, [0, 1], [[1.0, 2.0], [3.0, 4.0]], band=band, center=center)
    plt.close(fig)
