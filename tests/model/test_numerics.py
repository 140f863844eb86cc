"""Saturated-softmax numerics: tiny exact gradients still give unit normalized steps."""

import torch

import attnsvm as A
from attnsvm.model.train import block_normalize


def test_block_normalize_handles_subnormal_and_tiny_gradients():
    for dtype, scale in ((torch.float32, 1e-40), (torch.float64, 1e-200), (torch.float64, 1e-310)):
        grad = torch.tensor([[3.0, -1.0], [0.5, 2.0]], dtype=dtype) * scale
        step = block_normalize(grad, 2)
        assert torch.isfinite(step).all()
        torch.testing.assert_close(step.norm(), torch.tensor(1.0, dtype=dtype))
    batched = torch.zeros(3, 2, 2, dtype=torch.float64)
    batched[1] = 1e-250
    norms = block_normalize(batched, 2).flatten(1).norm(dim=-1)
    assert norms.tolist() == [0.0, 1.0, 0.0]


def test_ngd_keeps_growing_deep_into_saturation():
    """A2, float64: 3000 normalized steps of length 0.1 stay exact, so ||W|| grows linearly and the
    direction keeps improving like 1/||W||^2 (logit gaps in the hundreds, softmax tails far below
    1e-100): from step 1500 to 3000, 1 - corr falls by about 4. A run frozen by rounding would not."""
    problem = A.figure_problem("A2", generator=A.set_seed(3))
    W_mm = A.att_svm(problem.X, problem.Z, problem.opt).W
    model = A.WAttention.zeros(2)
    history = A.train(model, problem, 3000, reference=W_mm, log_every=500)
    assert abs(float(history.norm[-1]) - 300.0) < 1.0
    gap = 1 - history.corr
    assert float(history.corr[-1]) > 0.9999
    assert float(gap[-1]) < 0.3 * float(gap[history.steps == 1500][0])
    assert (history.corr[1:].diff() > -1e-9).all()


def test_sphere_path_stays_on_the_sphere():
    problem = A.figure_problem("A1", generator=A.set_seed(1))
    start = A.WAttention(torch.tensor([[0.1, 0.0], [0.0, -0.1]], dtype=torch.float64))
    radii = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    path = A.regularization_path(start, problem, radii, steps=50, sphere=True)
    torch.testing.assert_close(path.iterates.flatten(1).norm(dim=-1), radii)
