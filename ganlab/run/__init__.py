"""A run: composing its objects from the config (:mod:`ganlab.run.build`) and the dry run before it
(:mod:`ganlab.run.preflight`)."""
