"""The commands: ``ganlab-train`` (:mod:`ganlab.cli.train`), ``ganlab-eval`` (:mod:`ganlab.cli.evaluate`),
``ganlab-sample`` (:mod:`ganlab.cli.sample`), ``ganlab-compare`` (:mod:`ganlab.cli.compare`) and the Hydra callbacks
of a sweep (:mod:`ganlab.cli.sweep`). Nothing else in ganlab imports this package."""
