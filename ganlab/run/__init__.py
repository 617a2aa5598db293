"""A run: composing its objects from a checked config (:mod:`ganlab.run.build`), the way back from a checkpoint
(:mod:`ganlab.run.rebuild`), the dry run before it (:mod:`ganlab.run.preflight`), training one into its folder
(:mod:`ganlab.run.session`, what ``ganlab-train`` and a study's jobs run) and S seeds of one run vectorised in one
process (:mod:`ganlab.run.ensemble`). The run folder's names and records are a foundation: :mod:`ganlab.layout`."""
