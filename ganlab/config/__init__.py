"""The run config: typed schemas in Hydra's ConfigStore (:mod:`ganlab.config.schema`), the checks of a composed
config (:mod:`ganlab.config.check`), the config groups and their options (:mod:`ganlab.config.groups`), the rules
for resuming from a checkpoint (:mod:`ganlab.config.resume`) and the keys that moved (:mod:`ganlab.config.legacy`)."""
