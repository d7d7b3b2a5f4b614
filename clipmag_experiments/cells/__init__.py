"""Where one sweep cell stands before it runs: finished or not (``finished``), the same run as a
finished cell (``same_run``), its variant chosen from an earlier group's dev scores (``choice``),
continuing an earlier group's cell (``continuation``); whether a group's runs share a thread count
(``thread_counts``)."""
