"""Digits as patch sequences and translated digits on a noisy canvas (attnsvm.studies.digits)."""

import numpy as np
import pytest
import torch

import attnsvm as A
import attnsvm.studies.digits as AD


def _images(n=6, h=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, h, h, generator=g, dtype=torch.float64)
    x[x < 0.5] = 0.0                      # blank pixels, as in real digits
    return x


def _labels(n=6):
    return torch.tensor([1.0, -1.0] * (n // 2))


def test_patch_tokens_shapes_and_layout():
    x = torch.arange(2 * 8 * 8, dtype=torch.float64).reshape(2, 8, 8)
    tok = AD.patch_tokens(x, 2)
    assert tok.shape == (2, 16, 4 + 16) and tok.dtype == torch.float64
    # token t = a * 4 + b holds rows 2a..2a+1, columns 2b..2b+1, row-major, then e_t
    a, b = 1, 2
    t = a * 4 + b
    assert tok[1, t, :4].tolist() == x[1, 2 * a:2 * a + 2, 2 * b:2 * b + 2].flatten().tolist()
    assert tok[1, t, 4:].tolist() == torch.eye(16)[t].tolist()
    assert AD.patch_tokens(x, 4, position=False).shape == (2, 4, 16)


def test_patch_tokens_matches_the_chapter_layout():
    x = _images(3)
    n, grid, patch = 3, 4, 2
    expected = x.reshape(n, grid, patch, grid, patch).permute(0, 1, 3, 2, 4).reshape(n, 16, 4)
    assert torch.equal(AD.patch_tokens(x, 2)[..., :4], expected)


def test_translated_digits_shapes():
    td = AD.translated_digits(_images(), _labels(), canvas=16, patch=4, noise=0.1,
                              generator=A.set_seed(3))
    n, T, d = 6, 16, 16 + 16
    assert td.canvases.shape == (n, 16, 16) and td.offsets.shape == (n, 2)
    assert td.offsets.dtype == torch.int64
    assert td.X.shape == (n, T, d) and td.Z.shape == (n, d) and td.Y.shape == (n,)
    assert td.on_digit.shape == (n, T) and td.on_digit.dtype == torch.bool
    assert td.on_ink.shape == (n, T) and bool((td.on_ink <= td.on_digit).all())
    assert torch.allclose(td.Z, td.X.mean(1))
    assert bool(((td.offsets >= 0) & (td.offsets <= 8)).all())
    A.Problem(td.X, td.Y, td.Z, torch.zeros(d))         # a valid attention problem


def test_reproducible_from_a_seed():
    one = AD.translated_digits(_images(), _labels(), noise=0.2, generator=A.set_seed(7))
    two = AD.translated_digits(_images(), _labels(), noise=0.2, generator=A.set_seed(7))
    other = AD.translated_digits(_images(), _labels(), noise=0.2, generator=A.set_seed(8))
    assert torch.equal(one.canvases, two.canvases) and torch.equal(one.offsets, two.offsets)
    assert not torch.equal(one.canvases, other.canvases)


def test_digit_pixels_land_in_the_patches_at_its_offset():
    x = _images(20, seed=1)
    td = AD.translated_digits(x, _labels(20), noise=0.0, generator=A.set_seed(0))
    for i in range(20):
        r, c = td.offsets[i].tolist()
        assert torch.equal(td.canvases[i, r:r + 8, c:c + 8], x[i])     # the digit, at its offset
        rest = td.canvases[i].clone()
        rest[r:r + 8, c:c + 8] = 0
        assert float(rest.abs().sum()) == 0.0                           # nothing else without noise
        for t in range(16):
            a, b = divmod(t, 4)
            rows, cols = range(4 * a, 4 * a + 4), range(4 * b, 4 * b + 4)
            box = any(r <= p < r + 8 for p in rows) and any(c <= q < c + 8 for q in cols)
            assert bool(td.on_digit[i, t]) == box
            assert bool(td.on_ink[i, t]) == bool(td.X[i, t, :16].abs().sum() > 0)
    # the pixels of a token are the canvas's pixels of that patch
    assert torch.equal(td.X[:, 5, :16], td.canvases[:, 4:8, 4:8].reshape(20, 16))


def test_noise_is_added_everywhere_with_the_given_scale():
    x = torch.zeros(200, 8, 8, dtype=torch.float64)
    td = AD.translated_digits(x, torch.ones(200), noise=0.3, generator=A.set_seed(0))
    assert abs(float(td.canvases.std()) - 0.3) < 0.01
    assert not bool(td.on_ink.any())                                    # a blank digit holds no ink


def test_chance_is_the_exact_share_of_box_patches():
    # offsets uniform on {0..8}: each axis overlaps 2 patch rows when the offset is a multiple of 4
    counts = [(o + 7) // 4 - o // 4 + 1 for o in range(9)]
    offsets = torch.tensor([(r, c) for r in range(9) for c in range(9)])
    mask = AD.digit_patches(offsets, 8, 16, 4)
    share = mask.double().mean(-1)
    expected = torch.tensor([counts[r] * counts[c] / 16 for r in range(9) for c in range(9)],
                            dtype=torch.float64)
    assert torch.allclose(share, expected)
    assert abs(float(share.mean()) - (np.mean(counts) ** 2) / 16) < 1e-12


@pytest.mark.parametrize("call, fragment", [
    (lambda: AD.patch_tokens(torch.zeros(2, 8, 7), 2), "square"),
    (lambda: AD.patch_tokens(torch.zeros(2, 8, 8), 3), "multiple of the patch"),
    (lambda: AD.patch_tokens(torch.zeros(8, 8), 2), r"shape \(n, h, h\)"),
    (lambda: AD.patch_tokens(torch.full((1, 4, 4), float("nan")), 2), "NaN or inf"),
    (lambda: AD.place_on_canvas(torch.zeros(2, 8, 8), canvas=6), "at least as large"),
    (lambda: AD.place_on_canvas(torch.zeros(2, 8, 8), noise=-0.1), "noise"),
    (lambda: AD.translated_digits(torch.zeros(2, 8, 8), torch.ones(3)), "one per image"),
    (lambda: AD.translated_digits(torch.zeros(2, 8, 8), torch.tensor([0.0, 1.0])), "-1 or \\+1"),
    (lambda: AD.translated_digits(torch.full((2, 8, 8), 16.0), torch.ones(2)), r"\[0, 1\]"),
    (lambda: AD.translated_digits(torch.zeros(2, 8, 8), torch.ones(2), canvas=18), "multiple"),
    (lambda: AD.translated_digits(torch.zeros(2, 8, 8), torch.ones(2), canvas=8, patch=8), "2 x 2"),
    (lambda: AD.digit_patches(torch.tensor([[0, 9]]), 8, 16, 4), r"\[0, 8\]"),
    (lambda: AD.digit_patches(torch.tensor([0, 1]), 8, 16, 4), r"shape \(n, 2\)"),
    (lambda: AD.digit_patches(torch.tensor([[0, 1]]), 8, 16, 4, images=torch.zeros(2, 8, 8)),
     "one per offset"),
])
def test_bad_inputs_raise_value_error(call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call()


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError):
        AD.digit_patches(torch.tensor([[0.5, 1.0]]), 8, 16, 4)
    with pytest.raises(TypeError):
        AD.place_on_canvas(torch.zeros(2, 8, 8), generator=0)


def test_position_must_be_a_flag():
    for value in ("no", 0, None, 1.0):
        with pytest.raises(TypeError, match="position"):
            AD.patch_tokens(torch.zeros(2, 4, 4), 2, value)
    assert AD.patch_tokens(torch.zeros(2, 4, 4), 2, False).shape == (2, 4, 4)


def test_digit_patches_refuses_no_offsets_and_a_digit_larger_than_the_canvas():
    with pytest.raises(ValueError, match=r"n >= 1"):
        AD.digit_patches(torch.zeros(0, 2, dtype=torch.long), 4, 8, 4)
    with pytest.raises(ValueError, match="must fit the canvas"):
        AD.digit_patches(torch.zeros(1, 2, dtype=torch.long), 9, 8, 4)


# --- logistic_cv_accuracy: scikit-learn's LogisticRegression + GridSearchCV, without the overhead ---

def _logistic_data(n=60, p=5, noise=1.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.where(X @ rng.normal(size=p) + noise * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("n, p, noise, seed", [(60, 5, 1.0, 0), (40, 30, 0.0, 1), (50, 3, 3.0, 2),
                                               (36, 64, 0.5, 3)])
def test_logistic_cv_accuracy_matches_sklearn(n, p, noise, seed):
    """Same test accuracy and same chosen C as GridSearchCV(LogisticRegression); the hard cases
    are separable (p >= n/2, noise 0: large C runs far) and nearly random labels (ties in CV)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    X, y = _logistic_data(n, p, noise, seed)
    order = np.random.default_rng(seed + 10).permutation(n)
    train, test = order[: n // 2], order[n // 2:]
    Cs = np.logspace(-3, 4, 8)
    search = GridSearchCV(LogisticRegression(max_iter=5000), {"C": Cs}, cv=5).fit(X[train], y[train])
    folds = list(StratifiedKFold(5).split(X[train], y[train]))
    acc, C = A.studies.logistic_cv_accuracy(torch.tensor(X), torch.tensor(y), torch.tensor(train),
                                    torch.tensor(test), Cs, folds)
    assert C == search.best_params_["C"]
    assert acc == search.score(X[test], y[test])


def test_logistic_cv_accuracy_single_c_is_the_sklearn_fit():
    """With one C the refit is LogisticRegression(C): same predictions on held-out points, and a
    hand-counted accuracy (flattened (n, h, h) features)."""
    from sklearn.linear_model import LogisticRegression
    X, y = _logistic_data(80, 9, 0.7, 4)
    train, test = np.arange(50), np.arange(50, 80)
    ref = LogisticRegression(C=0.3, max_iter=5000).fit(X[train], y[train])
    folds = [(np.arange(25), np.arange(25, 50))]
    acc, C = A.studies.logistic_cv_accuracy(X.reshape(80, 3, 3), y, train, test, [0.3], folds)
    assert C == 0.3
    assert acc == np.mean(ref.predict(X[test]) == y[test])


def test_logistic_cv_accuracy_first_c_wins_ties():
    """Perfectly separated data with a margin: every C validates at 1.0, the first C is chosen."""
    X = np.concatenate([np.full((10, 1), 5.0), np.full((10, 1), -5.0)]) + np.linspace(0, 0.1, 20)[:, None]
    y = np.array([1.0] * 10 + [-1.0] * 10)
    train = np.arange(0, 20, 2)
    test = np.arange(1, 20, 2)
    folds = [(np.array([0, 1, 2, 5, 6, 7]), np.array([3, 4, 8, 9])),
             (np.array([2, 3, 4, 7, 8, 9]), np.array([0, 1, 5, 6]))]
    acc, C = A.studies.logistic_cv_accuracy(X, y, train, test, [10.0, 1.0, 100.0], folds)
    assert (acc, C) == (1.0, 10.0)


def test_logistic_cv_accuracy_refuses_bad_input():
    X, y = _logistic_data(20, 3)
    tr, te = np.arange(10), np.arange(10, 20)
    folds = [(np.arange(5), np.arange(5, 10))]
    ok_y = np.array([1.0, -1.0] * 10)
    with pytest.raises(ValueError, match="-1 or \\+1"):
        A.studies.logistic_cv_accuracy(X, np.where(ok_y > 0, 1.0, 0.0), tr, te, [1.0], folds)
    with pytest.raises(ValueError, match="NaN"):
        A.studies.logistic_cv_accuracy(np.where(np.eye(20, 3) > 0, np.nan, X), ok_y, tr, te, [1.0], folds)
    with pytest.raises(ValueError, match="one label only"):
        A.studies.logistic_cv_accuracy(X, ok_y, tr, te, [1.0], [(np.array([0, 2, 4]), np.array([1, 3]))])
    with pytest.raises(ValueError, match="positive"):
        A.studies.logistic_cv_accuracy(X, ok_y, tr, te, [0.0], folds)
    with pytest.raises(ValueError, match="lie in"):
        A.studies.logistic_cv_accuracy(X, ok_y, tr, np.array([20]), [1.0], folds)
    with pytest.raises(ValueError, match="lie in"):      # fold indices point into the training set
        A.studies.logistic_cv_accuracy(X, ok_y, tr, te, [1.0], [(np.arange(5), np.array([10]))])
    with pytest.raises(TypeError, match="integer"):
        A.studies.logistic_cv_accuracy(X, ok_y, tr.astype(float), te, [1.0], folds)
    with pytest.raises(ValueError, match="did not converge"):
        A.studies.logistic_cv_accuracy(X, ok_y, tr, te, [1.0], folds, max_iter=1)
