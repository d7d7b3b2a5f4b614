"""Where one sweep cell stands before it runs: finished or not (``finished``), the same run as a
finished cell (``same_run``), its variant chosen from an earlier group's dev scores (``choice``),
continuing an earlier group's cell (``continuation``); whether the runs of one table computed alike
(``numerics``: threads, precision and kernels)."""
