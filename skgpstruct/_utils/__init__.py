"""Utilities below every layer: device resolution (:mod:`.device`), the
fit log and progress bar (:mod:`.fit_log`), memory budgets
(:mod:`.memory`), deterministic parallel sums (:mod:`.parallel`) and the
seed range (:mod:`.seeds`).
"""
