"""What an answer is worth.

- ``certificate``: the discretisation certified against an accurate
  integration of the model, and the intervals to refine;
- ``uncertainty``: covariance, confidence intervals, identifiability;
- ``likelihood``: the noise levels, ``nllh``, ``det R``, AIC and BIC;
- ``fit_check``: lack of fit (runs test, noise ratio) and which notes are
  fit warnings;
- ``quantiles``: the distributions' quantiles the intervals use.

May import: ``transcription``, ``simulate``, ``runtime``, ``model``,
``experiment``, ``errors``.  Methods may import this wing (shooting's
standard errors), not the reverse.
"""
