"""Studies: a declared set of ganlab-train runs (arms x data sets x seeds, an optional tuning stage), run through
Hydra's launchers, collected into one table of evaluations and reported with stated tests (``ganlab-study``)."""
