"""Fuzz: the resource guard refuses problems too large to set up, before building."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.problem_size import DEFAULT_MAX_INTERVALS, check_problem_size, problem_size
from picard_casadi.transcription.discretisation import Discretisation


@pytest.fixture(scope="module")
def vdp():
    return pc.problem("vdp", seed=0)


@pytest.mark.parametrize("T", [1e-6, 1e-9, 1e-15, 5e-5])
def test_tiny_T_is_refused_at_once(vdp, T):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as info:
        pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", T=T, codegen=False)
    assert time.perf_counter() - t0 < 2.0
    msg = str(info.value)
    assert f"`T` = {T:g} makes" in msg and "intervals" in msg
    assert "max_intervals=" in msg and "longer T" in msg
    assert " GB" in msg or " TB" in msg or " MB" in msg


def test_the_message_names_the_limit_and_a_T_that_fits(vdp):
    with pytest.raises(ValueError, match=r"makes about 10,000,000 intervals \(9 nodes x 2 states") as info:
        pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", T=1e-6)
    msg = str(info.value)
    assert f"the default limit is {DEFAULT_MAX_INTERVALS:,} intervals" in msg
    assert "T >= 0.0001" in msg
    assert "pass max_intervals=10000000" in msg


def test_max_intervals_lowers_and_raises_the_limit(vdp):
    kw = dict(vdp.options, codegen=False, uncertainty=False)
    with pytest.raises(ValueError, match=r"makes 40 intervals.*the limit is max_intervals=39"):
        pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", max_intervals=39, **kw)
    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", max_intervals=40, **kw)
    assert res.success and res.settings["intervals"] == 40


def test_a_raised_limit_lets_a_large_problem_through_the_guard(vdp):
    size = check_problem_size(vdp.model, vdp.experiments, 1e-4, 9, max_intervals=200_000)
    assert size.intervals == 100_000 and size.exact


def test_the_count_is_the_discretisation_s(vdp):
    """The guard counts what Discretisation would build (breakpoints, short tails)."""
    t = np.linspace(0.0, 3.05, 62)
    exps = [pc.Experiment(t, np.ones((62, 2)), x0=[1, 0], breakpoints=[0.333, 1.5, 2.71]),
            pc.Experiment(t[:40] + 7.0, np.ones((40, 2)), x0=[1, 0])]
    for T in (0.1, 0.25, 0.3, 1.0, 5.0):
        size = problem_size(vdp.model, exps, T, 9)
        disc = Discretisation(vdp.model, exps, T, 9, "chebyshev")
        assert size.intervals == disc.n_intervals, T
        assert size.samples_per_interval == disc.M, T


def test_memory_budget_lowers_the_default_limit_for_large_models():
    """A 60-state model: about 1 MB per interval (its node sensitivities)."""
    import casadi as ca

    x = ca.SX.sym("x", 60)
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, name="big")
    t = np.linspace(0, 100, 11)
    exp = pc.Experiment(t, np.ones((11, 60)), x0=np.ones(60))
    with pytest.raises(ValueError, match=r"makes 5,000 intervals.*about \d.* GB.*the default "
                                         r"limit is [\d,]+ intervals"):
        pc.estimate(model, [exp], [1.0], T=0.02)


def test_too_many_nodes_is_refused_naming_nodes(vdp):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"\(5000 nodes x 2 states each.*or fewer nodes \(each "
                                         r"interval needs about \d.* GB\)"):
        pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", nodes=5000)
    with pytest.raises(ValueError, match=r"`nodes` = 12000: one interval alone .* needs about "
                                         r"\d.* GB.*use fewer nodes"):
        pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", nodes=12000)
    assert time.perf_counter() - t0 < 2.0


def test_many_experiments_are_counted_together(vdp):
    exps = [vdp.experiments[0]] * 3000  # 3000 x 40 intervals
    with pytest.raises(ValueError, match=r"makes 120,000 intervals"):
        pc.estimate(vdp.model, exps, vdp.p0, "picard-gn", T=0.25)


def test_cli_refuses_tiny_T_with_one_line(tmp_path):
    env = dict(os.environ, PICARD_CASADI_CACHE=str(tmp_path / "cache"))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "picard_casadi", "run", "vdp", "--T", "1e-6",
                          "--out", "res"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("picard-casadi run: error: `T` = 1e-06 makes")
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "res").exists()
    assert time.perf_counter() - t0 < 30


def test_a_default_T_too_fine_is_named_as_the_package_s_choice(vdp):
    # PEtab's Chen (500 states) was refused for "`T` = 140.625", which the
    # user never gave
    from picard_casadi.transcription.problem_size import check_problem_size

    with pytest.raises(ValueError, match=r"^the default `T` \(chosen from the data and the "
                                         r"model's rates\) = 0.001 makes .*method="
                                         r"'single-shooting' with a long T"):
        check_problem_size(vdp.model, vdp.experiments, 1e-3, 9, max_intervals=100, chosen=True)
    with pytest.raises(ValueError, match=r"^`T` = 0.001 makes .*go ahead$"):
        check_problem_size(vdp.model, vdp.experiments, 1e-3, 9, max_intervals=100)
