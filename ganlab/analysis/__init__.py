"""Comparing finished runs: the table of a sweep (:mod:`ganlab.analysis.table`) and score plots and curves
(:mod:`ganlab.analysis.plots`); the statistics behind them are :mod:`ganlab.stats`'."""
