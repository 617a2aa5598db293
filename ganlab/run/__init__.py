"""A run: its folder's names, finders and records (:mod:`ganlab.run.layout`), composing its objects from a checked
config (:mod:`ganlab.run.build`), the way back from a checkpoint (:mod:`ganlab.run.rebuild`), the dry run before it
(:mod:`ganlab.run.preflight`) and training one into its folder (:mod:`ganlab.run.session`, what ``ganlab-train`` and a
study's jobs run)."""
