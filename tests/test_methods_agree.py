"""The four methods solve the same problem (issue: comparison study)."""

import warnings

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.studies.compare import compare


@pytest.fixture(scope="module", params=["vdp", "lotka-volterra"])
def solved(request):
    prob = pc.problem(request.param, seed=0)
    out = {m: prob.estimate(m, uncertainty=False, codegen=False)
           for m in ("picard-gn", "ipopt", "shooting")}
    out["ipopt-gn"] = prob.estimate("ipopt", uncertainty=False, codegen=False,
                                    hessian="gauss-newton")
    return prob, out


def test_picard_gn_agrees_with_ipopt_on_the_same_discretisation(solved):
    prob, out = solved
    a, b = out["picard-gn"], out["ipopt"]
    assert a.success and b.success
    assert a.continuity_gap < 1e-6 and b.continuity_gap < 1e-6
    assert np.max(np.abs(a.p / b.p - 1.0)) < 0.005
    # in fact they agree to the solvers' tolerances
    assert np.max(np.abs(a.p / b.p - 1.0)) < 1e-5


def test_gauss_newton_hessian_reaches_the_same_optimum(solved):
    _, out = solved
    assert out["ipopt-gn"].success
    assert np.max(np.abs(out["ipopt-gn"].p / out["ipopt"].p - 1.0)) < 1e-5


def test_shooting_agrees_where_it_converges(solved):
    _, out = solved
    sh = out["shooting"]
    assert sh.success, sh.message
    # CVODES and the collocation differ by the discretisation error only
    assert np.max(np.abs(sh.p / out["picard-gn"].p - 1.0)) < 0.005


def test_paper_algorithm_agrees_where_it_converges():
    # the paper's loss for both (the likelihood's rounds would compare the
    # paper's algorithm stopped in its first round with shooting's last)
    prob = pc.problem("vdp", seed=0)
    res = prob.estimate("picard", uncertainty=False, codegen=False, max_iter=1500,
                        weights="none")
    ref = prob.estimate("shooting", uncertainty=False, codegen=False, weights="none")
    if res.success:
        assert np.max(np.abs(res.p / ref.p - 1.0)) < 0.005
    else:  # not converged in its budget: it is still close (and says so)
        assert "max_iter" in res.message
        assert np.max(np.abs(res.p / ref.p - 1.0)) < 0.02


def test_study_runs_end_to_end_and_writes_its_table(tmp_path):
    rows = compare(["vdp"], ["picard-gn", "ipopt"], seeds=[0, 1], repeats=2,
                   out=tmp_path, codegen=False)
    assert len(rows) == 4
    assert all(r["success"] for r in rows)
    for name in ("table.csv", "table.md", "comparison.png"):
        assert (tmp_path / name).stat().st_size > 0
    md = (tmp_path / "table.md").read_text()
    assert "| vdp | 1 | ipopt | yes |" in md
    # each row's processor time (the whole call's), in the CSV's last column
    # (the other columns keep their places)
    assert all(0.0 < r["cpu_time"] < 60.0 for r in rows)
    assert (tmp_path / "table.csv").read_text().splitlines()[0].endswith(",cpu_time")


def test_users_can_add_their_own_problem(tmp_path):
    base = pc.problem("vdp", seed=0)

    def factory(seed=0, noise_std=0.01):
        prob = pc.problem("vdp", seed=seed, noise_std=noise_std)
        prob.name = "my-vdp"
        return prob

    pc.register_problem("my-vdp", factory, "a user's copy of vdp")
    assert "my-vdp" in pc.problems()
    rows = compare(["my-vdp"], ["picard-gn"], codegen=False)
    alone = base.estimate("picard-gn", uncertainty=False, codegen=False)
    assert rows[0]["success"] and np.allclose(rows[0]["estimate"], alone.p)
    # the likelihood reached, beside the misfit (a PEtab user found only the misfit)
    assert rows[0]["nllh"] == pytest.approx(alone.nllh, rel=1e-9)


def test_bad_options_are_clear_errors():
    prob = pc.problem("vdp", seed=0)
    with pytest.raises(ValueError, match=r"unknown method 'ipopt2'; valid methods are: .*shooting"):
        prob.estimate("ipopt2")
    with pytest.raises(ValueError, match=r"ipopt_options\['max_iter'\] = 'many': rejected .*wrong type"):
        prob.estimate("ipopt", ipopt_options={"max_iter": "many"})
    with pytest.raises(ValueError, match=r"No such IPOPT option: no_such_option.*OPTIONS.html"):
        prob.estimate("ipopt", ipopt_options={"no_such_option": 1})
    with pytest.raises(TypeError, match=r"ipopt_options\['tol'\] must be an int, float or str"):
        prob.estimate("ipopt", ipopt_options={"tol": [1e-8]})
    with pytest.raises(ValueError, match=r"unknown method"):
        compare(["vdp"], ["newton"])


def test_compare_marks_a_flagged_fit(tmp_path):
    # a parameter held by its bound converges with a FitWarning; the study's row
    # read "ok" with nothing to tell it from a clean fit (a user's report)
    import casadi as ca

    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1], p_names=["k", "b"])
    exp = pc.simulate_experiment(model, [1.0], [0.5, 0.2], np.linspace(0, 5, 26), noise_std=0.01)
    prob = pc.Problem.from_data(model, [exp], [0.1, 0.1], name="held",
                                p_bounds=([0.0, 0.0], [0.3, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = pc.compare([prob], methods=["picard-gn"], out=tmp_path, codegen=False)
    assert rows[0]["success"] and "k ended on its upper bound 0.3" in rows[0]["fit_warnings"]
    assert (tmp_path / "table.md").read_text().splitlines()[2].endswith("| yes |")


def test_shooting_reports_its_own_gap_and_sum_of_squares():
    # a correct shooting fit on a mesh the collocation does not resolve (T = 2.5)
    # reported the collocation's continuity gap, 8.14, next to "converged", and a
    # note that the collocation fixed point "did not settle" (a user's comparison)
    import casadi as ca

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, y=x[0],
                     rhs=ca.vertcat(p[2] * (x[0] - x[0] ** 3 / 3 + x[1]),
                                    -(x[0] - p[0] + p[1] * x[1]) / p[2]))
    exp = pc.simulate_experiment(model, [-1.0, 1.0], [0.2, 0.2, 3.0], np.linspace(0, 20, 81),
                                 noise_std=0.05, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, [exp], [0.3, 0.3, 2.0], method="shooting", T=2.5)
    assert res.success and res.continuity_gap < 1e-8, res.continuity_gap
    assert not any("collocation" in w for w in res.warnings), res.warnings
    simulated = pc.simulate(model, res.x0[0], res.p, exp.t, rtol=1e-12, atol=1e-12)[:, 0]
    assert res.ssr == pytest.approx(float(np.sum((exp.y[:, 0] - simulated) ** 2)), rel=1e-6)


def test_compare_refuses_options_it_cannot_apply_before_running_anything(monkeypatch, tmp_path):
    # options not nested per problem, or for a problem or method not in the study,
    # were ignored (the study ran on the defaults); an option one method does not
    # take failed at the first row that met it, after the rows before had run
    import importlib

    study = importlib.import_module("picard_casadi.studies.compare")  # the module, not the function
    ran = []
    monkeypatch.setattr(study, "_row", lambda *a, **k: ran.append(a) or {})
    with pytest.raises(ValueError, match=r"'T' is not one of the study's problems \(vdp\).*"
                                         r"one level down"):
        compare(["vdp"], ["ipopt"], options={"T": 2.0})
    with pytest.raises(ValueError, match=r"'VDP' is not one of the study's problems"):
        compare(["vdp"], ["ipopt"], options={"VDP": {"max_iter": 1}})
    with pytest.raises(ValueError, match=r"'picard_gn' is not one of the study's methods"):
        compare(["vdp"], ["picard-gn"], method_options={"picard_gn": {"max_iter": 1}})
    with pytest.raises(ValueError, match=r"problem 'vdp' with method 'ipopt' \(nothing was "
                                         r"run\).*No such IPOPT option: maxiter"):
        compare(["vdp"], ["picard-gn", "ipopt"],
                method_options={"ipopt": {"ipopt_options": {"maxiter": 5}}})
    prob = pc.problem("vdp", seed=0)
    mine = pc.Problem.from_data(prob.model, prob.experiments, prob.p0, name="mine",
                                options={"tr_solver": "cg"})
    with pytest.raises(TypeError, match=r"problem 'mine' with method 'shooting'.*tr_solver"):
        compare([mine], ["picard-gn", "shooting"])
    # as the command line does: a bad seed, an empty list, an output folder
    # that cannot be made (a negative seed stopped the study after its first
    # rows, a folder under a file after all of them)
    with pytest.raises(ValueError, match=r"`seeds` must be integers >= 0 \(noise seeds\), "
                                         r"got \[-1, 0.5\]"):
        compare(["vdp"], ["ipopt"], seeds=[0, -1, 0.5])
    for kw, what in ((dict(methods=[]), "methods"), (dict(seeds=[]), "seeds")):
        with pytest.raises(ValueError, match=f"`{what}` is empty: give at least one"):
            compare(["vdp"], **{"methods": ["ipopt"], **kw})
    with pytest.raises(ValueError, match="`problem_names` is empty"):
        compare([], ["ipopt"])
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"`out` .*afile.* is a file, so the folder"):
        compare(["vdp"], ["ipopt"], out=tmp_path / "afile" / "sub")
    assert ran == []
    # one name where a sequence belongs is that one name (it read "v", "i", ...)
    compare("vdp", "ipopt", seeds=3)
    assert [(a[0], a[1], a[2]) for a in ran] == [("vdp", 3, "ipopt")]


def test_the_comparison_figure_does_not_magnify_equal_misfits():
    # misfits 1e-10 apart filled the log axis: bars of very different heights
    from picard_casadi.io.plotting import plot_comparison

    rows = [{"problem": "mine", "method": m, "solve_time": 0.1, "rel_error": None,
             "misfit": 3.75451e-05 * (1 + d), "success": True}
            for m, d in (("picard-gn", 1e-10), ("ipopt", 2e-10), ("shooting", 0.0))]
    fig = plot_comparison(rows)
    low, high = fig.axes[1].get_ylim()
    assert high / low >= 9.0


def test_the_comparison_figure_marks_failed_flagged_and_uncertified_runs():
    # a user's IPOPT row, flagged at 150 times the others' misfit, looked as
    # clean as theirs: only failures were hatched
    from picard_casadi.io.plotting import plot_comparison

    base = {"problem": "mine", "solve_time": 0.1, "rel_error": None, "misfit": 0.1}
    rows = [base | {"method": "picard-gn", "success": True, "certified": True},
            base | {"method": "ipopt", "success": True, "certified": True, "misfit": 16.7,
                    "fit_warnings": "the fit is systematically off the data"},
            base | {"method": "shooting", "success": True, "certified": False},
            base | {"method": "picard", "success": False, "certified": False}]
    fig = plot_comparison(rows)
    assert [bar.get_hatch() for bar in fig.axes[1].patches] == [None, "..", "..", "///"]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-2:] == [
        "did not converge", "converged: fit flagged or not certified"]


def test_the_table_says_why_a_run_failed():
    # a failed run's row read like the others, its reason only in the CSV
    # (a user's study: picard at its iteration limit looked the best)
    from picard_casadi.studies.compare import COLUMNS, format_markdown

    base = dict.fromkeys(COLUMNS, 0.0) | dict(problem="vdp", seed=0, estimate=[1.0],
                                              fit_warnings="", build_cached=float("nan"))
    rows = [base | dict(method="picard-gn", success=True, certified=True, message="converged"),
            base | dict(method="picard", success=False, certified=False,
                        message="iteration limit reached (max_iter=5000); the gaps ...")]
    md = format_markdown(rows)
    assert "| 0.00 | - |" in md  # one run: no cached build to show
    assert md.rstrip().endswith("- vdp seed 0 picard: iteration limit reached (max_iter=5000)")
    assert "not an optimum's" in md
    assert "Not converged" not in format_markdown(rows[:1])
