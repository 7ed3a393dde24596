"""``ait watch``: a live dashboard of a run, folded incrementally from its log.

- :mod:`.outer`, :mod:`.errors`, :mod:`.podtime`, :mod:`.jobs`: small projections the dashboard needs beyond
  the domain's own (batch progress, recent errors, pod idle/busy time, job phases);
- :mod:`.folder`: reads a log as it grows and folds each new record into every projection;
- :mod:`.view`: pure ``states -> DashboardView`` (plain data, testable without a terminal);
- :mod:`.render`: ``DashboardView -> rich renderable``;
- :mod:`.live`: the follow loop behind ``ait watch`` (``--once`` prints one frame).
"""
