"""How stiff the model is on a mesh: the largest decay rate times its interval's length.

A mode of the linearised model that decays at rate ``-Re(lambda)`` is
"stiff" on an interval of length ``h`` when ``z = h Re(lambda)`` is large and
negative.  The collocation of the paper (Chebyshev-Lobatto nodes) is only
A-stable: its stability function tends to 1 in modulus as ``z -> -inf``
(with 9 nodes 1e-3 at ``z = -30``, 0.18 at -100, 0.56 at -300, 0.84 at
-1000), so a mode that should vanish within an interval is carried to the
next with its sign flipping.  Up to moderate ``z`` the certificate sees the
error and the mesh refinement shortens the intervals until it is gone; far
beyond, no mesh of a sensible size does (Boehm's import rate of 1e5 on
4-minute intervals, ``z = -4e5``: the estimate went to another optimum).
Radau IIA collocation (``scheme="radau"``) is L-stable: ``|R(z)|`` at most
0.022 for every ``z <= -30`` with 9 nodes.

:func:`stiffness` measures ``max h_j (-Re lambda)`` over every node of a
solution on its mesh: from the eigenvalues of ``f_x`` for models of up to
:data:`MAX_EIGEN_STATES` states, and from the diagonal of ``f_x`` (each
state's own decay rate, the stiffness of mass-action kinetics) above, where
``J K`` eigenvalue problems of that size would cost more than a solve.
``scheme="auto"`` moves to Radau where it exceeds :data:`STIFF_STEP`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .discretisation import Discretisation

__all__ = ["Stiffness", "stiffness", "STIFF_STEP", "CREEPING_STIFF_STEP", "MAX_EIGEN_STATES",
           "cycles_per_sample", "ALIASED_CYCLES"]

#: ``h |Re lambda|`` above which a decaying mode is stiff for Chebyshev
#: collocation: its stability function exceeds 0.5 in modulus (0.56 at -300
#: with 9 nodes, 0.41 with 11), the mode carried on more than halved.  Below,
#: the refinement resolves it: a rate of 1400 on intervals of 0.16 (z = -219)
#: was certified on Chebyshev's refined mesh, where Radau followed the
#: likelihood's slope to a rate of 2e9 that the data cannot tell from 1400
STIFF_STEP = 300.0
#: ``h |Re lambda|`` above which a run that creeps (its steps cut to slivers
#: of their Gauss-Newton length) moves to Radau: the mode is carried on at
#: 0.18 of its size (9 nodes) and its sign flips from interval to interval
CREEPING_STIFF_STEP = 100.0
#: largest number of states whose Jacobians' eigenvalues are computed
MAX_EIGEN_STATES = 40


@dataclass(frozen=True)
class Stiffness:
    """The stiffest node of a solution on its mesh.

    Attributes
    ----------
    step : float
        ``max h_j (-Re lambda)`` over all intervals ``j`` and nodes (0 where
        no mode decays).
    interval : int
        The interval where it is largest (global numbering).
    time : float
        The node's time.
    """

    step: float
    interval: int
    time: float

    @property
    def stiff(self) -> bool:
        """Whether the largest ``h |Re lambda|`` exceeds :data:`STIFF_STEP`."""
        return self.step > STIFF_STEP


def stiffness(disc: Discretisation, node_jacobians: np.ndarray,
              among: np.ndarray | None = None) -> Stiffness:
    """The largest ``h (-Re lambda)`` of ``f_x`` at the nodes of a mesh.

    Parameters
    ----------
    disc : Discretisation
    node_jacobians : ndarray, shape (J, K, nx, nx)
        ``f_x`` at every node (``Transcription.node_jacobians``).
    among : ndarray (J,) of bool, optional
        The intervals to look at (all by default).

    Returns
    -------
    Stiffness
    """
    Fx = np.asarray(node_jacobians, float)
    J, K, nx, _ = Fx.shape
    if nx == 0 or J == 0:
        return Stiffness(0.0, 0, float(disc.t0[0]) if J else 0.0)
    finite = np.all(np.isfinite(Fx.reshape(J, K, -1)), axis=2)
    Fx = np.where(finite[:, :, None, None], Fx, 0.0)
    if nx <= MAX_EIGEN_STATES:
        rates = -np.linalg.eigvals(Fx).real  # (J, K, nx)
    else:
        rates = -np.einsum("jkii->jki", Fx)
    z = disc.h[:, None] * np.maximum(rates.max(axis=2), 0.0)  # (J, K)
    if among is not None:
        z = np.where(np.asarray(among, bool)[:, None], z, 0.0)
    j, k = np.unravel_index(int(np.argmax(z)), z.shape)
    return Stiffness(float(z[j, k]), int(j), float(disc.node_times[j, k]))


#: the model oscillating more than this many times between consecutive
#: samples at the start is noted (:func:`cycles_per_sample`)
ALIASED_CYCLES = 2.0


def cycles_per_sample(disc: Discretisation, node_jacobians: np.ndarray,
                      lasting: bool = False) -> float:
    """The most cycles the linearised model completes between consecutive
    samples of an experiment at the nodes of a mesh: ``max |Im lambda|`` of
    ``f_x`` times the median sample spacing, over ``2 pi`` (0 where nothing
    oscillates, or for models of more than :data:`MAX_EIGEN_STATES` states).
    Data sampled so far apart cannot follow the model: a Duffing
    oscillator's times in milliseconds for seconds oscillated 15 times
    between samples, and the fit had not returned after 15 minutes.
    ``lasting``: only the modes that keep half their size over a sample
    spacing (``Re lambda`` times it above ``-ln 2``; a faster one dies out
    between samples, which see no oscillation to alias), and over most of
    the record: the median over an experiment's intervals of each one's
    fastest (an F-18's roll manoeuvre at 0.1 s: 0.57 cycles per sample on
    one interval of 101, 0.04 on half of them)."""
    Fx = np.asarray(node_jacobians, float)
    J, K, nx, _ = Fx.shape
    if nx == 0 or J == 0 or nx > MAX_EIGEN_STATES:
        return 0.0
    finite = np.all(np.isfinite(Fx.reshape(J, K, -1)), axis=2)
    lam = np.linalg.eigvals(np.where(finite[:, :, None, None], Fx, 0.0))
    most = 0.0
    for e, sl in enumerate(disc.intervals_of):
        times = np.unique(np.asarray(disc.experiments[e].t, float))
        if times.size > 2:
            spacing = float(np.median(np.diff(times)))
            omega = np.abs(lam[sl].imag)
            if lasting:
                omega = np.where(lam[sl].real * spacing > -np.log(2.0), omega, 0.0)
                fastest = float(np.median(omega.reshape(omega.shape[0], -1).max(axis=1)))
            else:
                fastest = float(omega.max(initial=0.0))
            most = max(most, fastest * spacing)
    return most / (2.0 * np.pi)

