"""A run: its folder's names, finders and records (:mod:`ganlab.run.layout`), composing its objects from a checked
config (:mod:`ganlab.run.build`), the way back from a checkpoint (:mod:`ganlab.run.rebuild`) and the dry run before it
(:mod:`ganlab.run.preflight`)."""
