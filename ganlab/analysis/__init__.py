"""Comparing finished runs: the table of a sweep (:mod:`ganlab.analysis.table`), score plots and curves
(:mod:`ganlab.analysis.plots`) and the statistics behind them (:mod:`ganlab.analysis.stats`)."""
