import math

import pytest
import torch
import torch.nn.functional as F

from optim_support import assert_untouched, ctx, digits_split, snapshot, trained_cnn  # noqa: F401
from optimizers import DistillSettings, distillation, kd_loss

S = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]])
T = torch.tensor([[1.5, 1.0, -0.5], [-1.0, 0.0, 2.0]])
Y = torch.tensor([0, 2])


def _by_hand(s, t, y, temp, alpha):
    p = torch.exp(t / temp) / torch.exp(t / temp).sum(1, keepdim=True)
    log_q = s / temp - torch.log(torch.exp(s / temp).sum(1, keepdim=True))
    kl = (p * (torch.log(p) - log_q)).sum() / s.shape[0]  # batchmean
    ce = -(s - torch.log(torch.exp(s).sum(1, keepdim=True)))[torch.arange(len(y)), y].mean()
    return alpha * temp ** 2 * kl + (1 - alpha) * ce, kl, ce


@pytest.mark.parametrize("temp,alpha", [(1.0, 0.5), (4.0, 0.7), (2.5, 0.3)])
def test_kd_loss_matches_hand_computation(temp, alpha):
    expected, _, _ = _by_hand(S, T, Y, temp, alpha)
    assert kd_loss(S, T, Y, temp, alpha).item() == pytest.approx(expected.item(), rel=1e-5)


def test_kd_loss_extremes_and_t_squared_scaling():
    assert kd_loss(S, T, Y, 4.0, 0.0).item() == pytest.approx(F.cross_entropy(S, Y).item())
    _, kl, _ = _by_hand(S, T, Y, 4.0, 1.0)
    assert kd_loss(S, T, Y, 4.0, 1.0).item() == pytest.approx(16 * kl.item(), rel=1e-5)
    # Identical logits: no divergence, whatever the temperature.
    assert kd_loss(S, S, Y, 3.0, 1.0).item() == pytest.approx(0.0, abs=1e-6)
    assert math.isfinite(kd_loss(S * 100, T * 100, Y, 0.5, 0.5).item())


def test_distill_trains_student_and_leaves_teacher(ctx, trained_cnn):
    snap = snapshot(trained_cnn)
    settings = DistillSettings(temperature=4.0, alpha=0.7, epochs=1)
    out = distillation.apply(trained_cnn, settings, ctx)
    assert_untouched(trained_cnn, snap)
    assert out.config == {"distill": {"student": "seed_cnn_small", "temperature": 4.0,
                                      "alpha": 0.7, "epochs": 1}}
    student_params = sum(p.numel() for p in out.model.parameters())
    assert student_params < sum(p.numel() for p in trained_cnn.parameters()) / 4
    control = distillation.train_scratch(settings, ctx)
    assert control.config == {"student-scratch": {"student": "seed_cnn_small", "epochs": 1}}
    assert type(control.model) is type(out.model)
    assert not all(torch.equal(a, b) for a, b in zip(control.model.parameters(),
                                                     out.model.parameters()))


def test_student_choice_errors(ctx, trained_cnn):
    ctx.teaching.default_student = None
    with pytest.raises(ValueError, match="student"):
        distillation.apply(trained_cnn, DistillSettings(epochs=1), ctx)
    with pytest.raises(ValueError, match="unknown model"):
        distillation.apply(trained_cnn, DistillSettings(student="nope", epochs=1), ctx)


def test_recover_keeps_zeros(ctx, trained_cnn):
    from optimizers import PruneSettings, pruning, sparsity_report
    pruned = pruning.apply(trained_cnn, PruneSettings(0.5, "l1", 0), ctx).model
    snap = snapshot(pruned)
    out = distillation.recover(pruned, trained_cnn, DistillSettings(epochs=1), ctx, 1,
                               keep_zeros=True)
    assert_untouched(pruned, snap)
    assert sparsity_report(out.model)["effective_sparsity"] == pytest.approx(0.5, abs=1e-3)
    assert out.config["distill"]["mode"] == "recover"
