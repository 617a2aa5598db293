"""Check a study before any job starts: the study's own rules, then every job's overrides as ``ganlab-train``
checks them (composed with ``conf/train.yaml``, then ganlab's config checks)."""

from __future__ import annotations

import contextlib

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

from ganlab.config.check import (
    ConfigError,
    _check_untyped_bools,
    _strict_bools,
    check_target_values,
    check_typed,
    explain,
)
from ganlab.study.plan import all_variants, check_folders, overrides
from ganlab.study.schema import StudyError, StudySchema, check_study


def check_overrides(lines: list[str]) -> None:
    """Compose ``conf/train.yaml`` with ``lines`` (in an initialised Hydra context) and run ganlab's checks on it:
    true/false values, the schemas of the typed groups, the ``_target_`` arguments, ``model.conditional``.

    Raises:
        ConfigError: what :func:`ganlab.config.check.check_command_line` raises, and Hydra's own message for a
            composition error that module does not explain (an unknown config group, a bad override line).
    """
    _strict_bools(lines)
    try:
        cfg = compose("train", overrides=lines)
    except HydraException as err:
        raise ConfigError(explain(err, lines) or str(err)) from err
    check_typed(cfg)
    check_target_values(cfg)
    _check_untyped_bools(cfg, lines)


def check_jobs(study: StudySchema) -> int:
    """:func:`ganlab.study.schema.check_study` and :func:`ganlab.study.plan.check_folders`, then
    :func:`check_overrides` on every distinct job override list
    (each arm on each data set at each axis value; runs differ beyond that only in ``seed=<int>``, typed).

    Returns:
        The number of override lists checked.

    Raises:
        StudyError: the study's rule that fails, or the arm, data set and value whose overrides fail their check,
            with the check's message.
    """
    import ganlab

    check_study(study)
    check_folders(study)
    variants = all_variants(study)
    from hydra.core.global_hydra import GlobalHydra

    # inside ganlab-study, Hydra is already set up on ganlab's config folder; elsewhere (a test, a notebook) set it up
    context = contextlib.nullcontext() if GlobalHydra.instance().is_initialized() else \
        initialize_config_dir(config_dir=str(ganlab.CONFIG_DIR), version_base="1.3", job_name="ganlab_study")
    with context:
        for job in variants:
            lines = overrides(study, job)
            try:
                check_overrides(lines)
            except ConfigError as err:
                at = f" at {study.tuning.axis.name} {job.value:g}" if job.value is not None and study.tuning else ""
                raise StudyError(f"study {study.name}: arm {job.arm!r} on {job.dataset}{at} fails ganlab-train's "
                                 f"config check: {err}\n  its overrides: {' '.join(lines)}") from None
    return len(variants)
