"""Plumbing shared by the finite and the limit engines.

``steps`` (the step loop: progress, Ctrl-C, divergence), ``backend``
(NumPy or CuPy, chosen once), ``memory`` (the memory guard), ``options``
(checks of the options both engines take), ``meta`` (run metadata),
``progress`` (bars), ``executors`` (many runs on a pool or cluster) and
``trajectory`` (the one result type).
"""
