"""The study schema: a study is data (``conf/study/<name>.yaml``), checked against these dataclasses.

Each study YAML names :class:`StudySchema` first in its defaults list (``- /schema/study@_here_``), so OmegaConf
refuses a key the schema lacks and a value of the wrong type when the study is composed; :func:`check_study` then
checks what types cannot say (seeds disjoint, the control among the arms, the budget's steps a multiple of its
evaluation interval, ...).

A study trains every arm on every data set. With a tuning stage, each (arm, data set) first runs at every value of
the tuning axis on the tuning seeds; the value whose primary endpoint has the best mean over those seeds is chosen
(ties broken as ``tuning.tie_break`` states), then the reporting seeds run at the chosen value. The report reads
the reporting seeds only, so the selection does not bias the table.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional  # noqa: UP035 (OmegaConf reads these)

from omegaconf import MISSING

from ganlab.layout import DATA_PREFIX


@dataclasses.dataclass
class ReuseSchema:
    """Runs of another study taken for this arm: ``study`` (a name under ``conf/study/``) and its ``arm`` whose
    every job has exactly this arm's ``ganlab-train`` overrides (checked before anything runs). Their rows come from
    that study's committed table of evaluations while this arm's own run folders hold none."""

    study: str = MISSING
    arm: str = MISSING


@dataclasses.dataclass
class ArmSchema:
    """One arm: a name (the table's row label) and the ``ganlab-train`` overrides it adds to ``common``."""

    name: str = MISSING
    overrides: List[str] = dataclasses.field(default_factory=list)
    #: this arm's own overrides for the tuning axis (``{value}`` replaced), e.g. WGAN-GP's ``strategy.wgan_gp.lr``;
    #: null: the axis's ``overrides``
    axis_overrides: Optional[List[str]] = None
    #: this arm's reporting seeds when fewer than the study's (a costly arm; a subset of ``seeds``); null: all
    seeds: Optional[List[int]] = None
    #: score-name prefixes this arm's table cells read in place of the column's (also after ``data/``), e.g.
    #: ``{"class/": "pred_class/"}`` for an unconditional G grouped by predicted class where the conditional arms
    #: are grouped by requested class; {}: the column's own score
    read_as: Dict[str, str] = dataclasses.field(default_factory=dict)
    #: the same runs made by another study (same overrides, checked), reused rather than retrained; null: none
    reuse: Optional[ReuseSchema] = None
    #: the data sets this arm runs on (a subset of the study's ``datasets``); null: every one
    datasets: Optional[List[str]] = None
    #: this arm's own budget steps (a multiple of ``budget.eval_every`` and ``budget.chunk``); null: ``budget.steps``
    steps: Optional[int] = None


@dataclasses.dataclass
class AxisSchema:
    """The tuning axis: its name (a CSV column, e.g. ``lr``), the train overrides that set it (``{value}`` is
    replaced by each value) and the values tried."""

    name: str = MISSING
    overrides: List[str] = MISSING
    values: List[float] = MISSING


@dataclasses.dataclass
class TuningSchema:
    """The tuning stage: every value of ``axis`` on every tuning seed; the best mean primary endpoint wins.

    ``tie_break``: applied in order when means tie; a score name (its mean over the tuning seeds, at the endpoint's
    window, better by its direction), ``-value`` (the lower axis value) or ``value`` (the higher one).
    ``edge``: ``allow`` or ``stop``: whether the reporting stage runs while a choice sits at the smallest or largest
    axis value (:data:`EDGES`)."""

    axis: AxisSchema = MISSING
    seeds: List[int] = MISSING
    tie_break: List[str] = dataclasses.field(default_factory=lambda: ["-value"])
    edge: str = "allow"


@dataclasses.dataclass
class BudgetSchema:
    """Every run's budget: generator steps, the evaluation interval and the chunk length (the checkpoint interval:
    a killed run loses at most one chunk; each evaluation row carries the wall time of the job that made it)."""

    steps: int = MISSING
    eval_every: int = MISSING
    chunk: int = MISSING


#: How a table cell summarises the per-seed values: ``std`` (mean ± sample std), ``ci95`` (mean [low, high], the
#: two-sided 95 % Student-t interval of the mean), ``se`` (mean ± standard error), ``none`` (the mean alone).
SPREADS = ("std", "ci95", "se", "none")
#: How one run becomes one value: ``window`` (the mean of its last ``last`` evaluations) or ``best`` (its best
#: evaluation, by the score's direction, over the whole run).
REDUCES = ("window", "best")
#: How each arm is compared with the control arm (:class:`TestsSchema`).
TESTS = ("welch", "paired", "none")
#: What the runner does when a tuning choice sits at the smallest or largest axis value (:mod:`ganlab.study.edges`):
#: ``allow`` reports it as it is, ``stop`` runs no reporting run until every choice is interior.
EDGES = ("allow", "stop")


@dataclasses.dataclass
class EndpointSchema:
    """The primary endpoint: per seed, the mean of ``score`` over its last ``last`` evaluations (1: the final
    evaluation); cells show ``scale`` x the value with format ``fmt`` and the spread ``spread`` (:data:`SPREADS`)."""

    score: str = "modes_covered"
    last: int = 5
    label: Optional[str] = None
    scale: float = 1.0
    fmt: str = ".1f"
    spread: str = "std"
    reduce: str = "window"
    #: the spread's format (null: ``fmt``), e.g. ``.2g`` for a standard error beside a ``.3g`` mean
    spread_fmt: Optional[str] = None


@dataclasses.dataclass
class ColumnSchema:
    """A further table column, like the endpoint: a score averaged over each seed's last ``last`` evaluations;
    ``test``: compared with the control arm too (and counted in the multiplicity correction)."""

    score: str = MISSING
    last: int = 1
    label: Optional[str] = None
    scale: float = 1.0
    fmt: str = ".1f"
    test: bool = False
    spread: str = "std"
    reduce: str = "window"
    spread_fmt: Optional[str] = None


@dataclasses.dataclass
class TestsSchema:
    """The comparison of each arm with the control arm, per data set and tested column.

    ``test``: ``welch`` (Welch's unequal-variance t-test, scipy.stats.ttest_ind(equal_var=False)), ``paired``
    (scipy.stats.ttest_rel over the seeds both arms ran; arms must share their seeds) or ``none`` (a survey: no
    test columns, the table says so). ``correction``: ``holm``
    (Holm 1979, over every test in the table) or ``none``; ``alpha``: the family-wise level the table states."""

    test: str = "welch"
    correction: str = "holm"
    alpha: float = 0.05
    p_fmt: str = ".2g"


@dataclasses.dataclass
class FactorialSchema:
    """A 2 x 2 design inside the arms: ``cells`` names the arms (A off, B off), (A off, B on), (A on, B off),
    (A on, B on); the table gives each main effect (the difference of the means over the other factor's two levels)
    and the interaction ((A on, B on) - (A on, B off)) - ((A off, B on) - (A off, B off)) on the primary endpoint,
    with 95 % t-intervals and p from the pooled within-cell variance (two-way ANOVA with replication, N - 4 df).
    ``a``, ``b``, ``interaction``: the rows' labels."""

    cells: List[str] = MISSING
    a: str = MISSING
    b: str = MISSING
    interaction: str = "interaction"


@dataclasses.dataclass
class PublishedSchema:
    """Numbers from elsewhere, printed under the study's table as given: ``title`` (a line above), ``header`` (the
    column names) and ``rows`` (each a list of cells, as many as the header)."""

    title: str = ""
    header: List[str] = MISSING
    rows: List[List[str]] = MISSING


@dataclasses.dataclass
class LabelSchema:
    """A collapse label computed from a score every evaluation already has (the detection table's reference).

    ``scores``: per data set, the ``evals.csv`` column holding KL(p_G || U_K) in nats, the divergence of G's
    histogram over the data set's K modes from the uniform one. An evaluation is collapsed when G uses fewer than
    ``effective_fraction`` x K modes evenly: K exp(-KL) < ``effective_fraction`` x K, i.e. KL > -ln
    ``effective_fraction``. A run is collapsed when an evaluation at step >= ``warmup`` is; its drop step is the
    first evaluation of the unbroken stretch of collapsed evaluations that holds the first such one."""

    name: str = MISSING
    rule: str = ""
    scores: Dict[str, str] = MISSING
    effective_fraction: float = 0.5
    warmup: int = 1000


@dataclasses.dataclass
class BootstrapSchema:
    """Percentile bootstrap over runs, for the continuous statistics (median lead times, AUROC): ``resamples``
    resamples of the runs with replacement, within each data set (``stratified``), from
    ``numpy.random.default_rng(seed)``; ``level``: the two-sided coverage of every interval of the table, the rates'
    Wilson score intervals included."""

    resamples: int = 2000
    seed: int = 0
    stratified: bool = True
    level: float = 0.95


@dataclasses.dataclass
class DetectionSchema:
    """The report of a labelled collapse corpus (:mod:`ganlab.study.detection`): the detector, the risk and the
    diversity drop as classifiers of the runs in ``corpus`` (``runs.csv``, ``evals.csv``, ``signals.csv``).

    ``warmup``: the label's and the detectors' first judged step; ``horizon``: steps before a drop step whose
    monitored steps are positives in the risk's fit; ``fit_on``: the data sets the risk and the diversity drop are
    fitted on; ``image_sets``: the data sets that are images (the others are 2-D points); ``labels``: further
    labels the shipped detectors are measured against, with intervals (``bootstrap``: Wilson for rates, the
    bootstrap for lead times and AUROC)."""

    corpus: str = MISSING
    warmup: int = 1000
    horizon: int = 500
    fit_on: List[str] = dataclasses.field(default_factory=lambda: ["ring8"])
    image_sets: List[str] = dataclasses.field(default_factory=lambda: ["digits"])
    labels: List[LabelSchema] = dataclasses.field(default_factory=list)
    bootstrap: BootstrapSchema = dataclasses.field(default_factory=BootstrapSchema)


@dataclasses.dataclass
class PowerSchema:
    """What the table could detect (:mod:`ganlab.study.power`): under the table, per arm and data set, the smallest
    difference of the primary endpoint that Welch's test detects with probability ``level`` at Holm's first
    threshold, from the rows' own standard deviations; and, where ``published`` gives the difference a paper
    reports on a data set (the endpoint's units, before the column's ``scale``; e.g. PacGAN's ring: 7.9 - 6.3 = 1.6
    modes), the seeds per arm that difference would need. ``source``: where the published differences come from."""

    level: float = 0.8
    published: Dict[str, float] = dataclasses.field(default_factory=dict)
    source: str = ""


@dataclasses.dataclass
class StudySchema:
    """A study: arms x data sets, an optional tuning stage, reporting seeds, one budget, the endpoint and the tests.

    ``common``: train overrides every run gets (the model, batch size, cheap scorers, ...). ``runs``: the folder
    holding one run folder per job (the source of truth). ``results``: where the study's table of every evaluation
    (``evaluations.csv``), ``table.md``, ``curves.png`` and the results page go (default ``<runs>/results``, so a
    user's study stays out of the docs' Results menu; the shipped studies set ``docs/results/<name>``). ``scores``:
    the scores written to the CSV at every evaluation; ``data_scores``: those whose held-out baseline
    (``data/<score>``) goes there too. ``reach``: a score whose per-seed final value is counted when it equals the
    data's (e.g. seeds with all modes).
    ``suffix``: appended to the report's file names, so a variant (other axis values, say) reports beside its
    parent study from the same ``evaluations.csv``. ``baseline_rows``: under each arm's row, a row of the data's
    held-out baseline of every column (``data/<score>``, read as the arm reads its scores).
    """

    name: str = MISSING
    description: str = ""
    arms: List[ArmSchema] = MISSING
    datasets: List[str] = MISSING
    #: a data set's own train overrides (default ``dataset=<name>``), e.g. ``ring: [experiment=pacgan_ring]``
    dataset_overrides: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    common: List[str] = dataclasses.field(default_factory=list)
    tuning: Optional[TuningSchema] = None
    seeds: List[int] = MISSING
    budget: BudgetSchema = MISSING
    endpoint: EndpointSchema = dataclasses.field(default_factory=EndpointSchema)
    columns: List[ColumnSchema] = dataclasses.field(default_factory=list)
    #: the arm every other is tested against (null only in a study reported by ``detection``)
    control: Optional[str] = MISSING
    tests: TestsSchema = dataclasses.field(default_factory=TestsSchema)
    factorial: Optional[FactorialSchema] = None
    #: published numbers shown under the table as given (e.g. a paper's rows, copied): a header and rows of cells
    published: Optional[PublishedSchema] = None
    scores: List[str] = dataclasses.field(default_factory=lambda: ["modes_covered", "hq_fraction", "reverse_kl"])
    data_scores: List[str] = dataclasses.field(default_factory=lambda: ["modes_covered"])
    reach: Optional[str] = "modes_covered"
    runs: str = "runs/study/${.name}"
    #: under the run folder unless the study says otherwise: the shipped studies set ``docs/results/<name>``
    results: str = "${.runs}/results"
    #: appended to the report's file names (``table<suffix>.md``, ...): a variant reported beside its parent
    suffix: str = ""
    #: arm name -> reporting seeds the report leaves out of that arm's row, tests, factorial and curves (e.g. the
    #: runs that selected the study's setting); training is unchanged
    exclude_seeds: Dict[str, List[int]] = dataclasses.field(default_factory=dict)
    #: under each arm's row, the data baseline of every column (``data/<score>``) over the same seeds
    baseline_rows: bool = False
    #: a labelled collapse corpus: collected as runs/evals/signals CSVs and reported as the detection table
    detection: Optional[DetectionSchema] = None
    #: under the table, the smallest difference each test could detect and the seeds a published one would need
    power: Optional[PowerSchema] = None


def arm_score(arm: ArmSchema, score: str) -> str:
    """The score an arm's cell of the column ``score`` reads: the longest prefix of ``score`` in ``arm.read_as``
    replaced (also after ``data/``), e.g. ``data/class/mean/recall`` -> ``data/pred_class/mean/recall`` with
    ``read_as={"class/": "pred_class/"}``; ``score`` itself when no prefix matches."""
    data, base = (DATA_PREFIX, score.removeprefix(DATA_PREFIX)) if score.startswith(DATA_PREFIX) else ("", score)
    hits = [p for p in arm.read_as if base.startswith(p)]
    if not hits:
        return score
    prefix = max(hits, key=len)
    return data + arm.read_as[prefix] + base[len(prefix):]


class StudyError(ValueError):
    """A study that cannot run or be reported; the message names what is wrong and how to fix it."""


def _duplicates(items: list) -> list:
    return sorted({x for x in items if items.count(x) > 1}, key=str)


def check_power(study: StudySchema) -> None:
    """``power``: a level in (alpha, 1), published differences for data sets of the study, Welch's test.

    Raises:
        StudyError: naming the first problem and how to fix it.
    """
    pw = study.power
    if not study.tests.alpha < pw.level < 1:
        raise StudyError(f"study {study.name}: power.level must lie between tests.alpha ({study.tests.alpha:g}) and "
                         f"1 (got {pw.level:g}); 0.8 is the usual choice")
    if extra := sorted(set(pw.published) - set(study.datasets)):
        raise StudyError(f"study {study.name}: power.published names {extra}, which are not among datasets "
                         f"{list(study.datasets)}")
    if study.tests.test != "welch":
        raise StudyError(f"study {study.name}: power is computed for Welch's test only (tests.test is "
                         f"{study.tests.test!r}); remove power: or use tests.test: welch")


def check_study(study: StudySchema) -> None:
    """What the types cannot check: unique arm names and data sets, the control among the arms, reporting seeds
    disjoint from the tuning seeds and no override pinning a seed key (:func:`check_seed_overrides`), positive
    budget with ``steps`` a multiple of ``eval_every`` and ``chunk``, a ``{value}`` in every axis override, a known
    ``tuning.edge`` (``stop``: positive axis values), known tests and correction, windows >= 1, ``exclude_seeds``
    naming arms and reporting seeds.

    Raises:
        StudyError: naming the first problem and how to fix it.
    """
    names = [a.name for a in study.arms]
    if not names:
        raise StudyError(f"study {study.name}: no arms; list at least one under arms:")
    if dup := _duplicates(names):
        raise StudyError(f"study {study.name}: arm names must be unique, {dup} appear more than once")
    if dup := _duplicates(list(study.datasets)):
        raise StudyError(f"study {study.name}: datasets {dup} appear more than once")
    if study.control is None and study.detection is None:
        raise StudyError(f"study {study.name}: control is null; name the arm the others are tested against")
    if study.control is not None and study.control not in names:
        raise StudyError(f"study {study.name}: control arm {study.control!r} is not an arm; choose from {names}")
    if not study.seeds or (dup := _duplicates(list(study.seeds))):
        raise StudyError(f"study {study.name}: seeds must be a non-empty list without repeats (got {study.seeds})")
    b = study.budget
    if min(b.steps, b.eval_every, b.chunk) <= 0 or b.steps % b.eval_every or b.steps % b.chunk:
        raise StudyError(f"study {study.name}: budget.steps ({b.steps}) must be a positive multiple of "
                         f"budget.eval_every ({b.eval_every}) and of budget.chunk ({b.chunk}), so that the last "
                         "step is evaluated and checkpointed")
    check_seed_overrides(study)
    if study.tuning is not None:
        t = study.tuning
        if overlap := sorted(set(t.seeds) & set(study.seeds)):
            raise StudyError(f"study {study.name}: tuning seeds {list(t.seeds)} and reporting seeds "
                             f"{list(study.seeds)} overlap in {overlap}; the table must use seeds the selection "
                             "did not see: pick disjoint seeds")
        if not t.seeds or not t.axis.values or _duplicates(list(t.axis.values)):
            raise StudyError(f"study {study.name}: tuning.seeds and tuning.axis.values must be non-empty lists "
                             "without repeats")
        for arm in study.arms:
            axis = arm.axis_overrides if arm.axis_overrides is not None else t.axis.overrides
            if not axis or not all("{value}" in o for o in axis):
                raise StudyError(f"study {study.name}, arm {arm.name!r}: every axis override must contain "
                                 f"{{value}} (got {list(axis)})")
        if t.edge not in EDGES:
            raise StudyError(f"study {study.name}: tuning.edge must be {' or '.join(EDGES)} (got {t.edge!r})")
        if t.edge == "stop" and min(t.axis.values) <= 0:
            raise StudyError(f"study {study.name}: tuning.edge stop extends the grid by its ratios, so every "
                             f"tuning.axis.values entry must be positive (got {list(t.axis.values)}); use "
                             "tuning.edge: allow for a grid with 0 or negative values")
        for key in t.tie_break:
            if key.lstrip("-") != "value" and key.lstrip("-") not in study.scores:
                raise StudyError(f"study {study.name}: tuning.tie_break entry {key!r} is neither value, -value "
                                 f"nor one of the collected scores {list(study.scores)}")
    if study.tests.test not in TESTS or study.tests.correction not in ("holm", "none"):
        raise StudyError(f"study {study.name}: tests.test must be one of {TESTS} (got {study.tests.test!r}) and "
                         f"tests.correction holm or none (got {study.tests.correction!r})")
    if study.power is not None:
        check_power(study)
    if extra := sorted(set(study.dataset_overrides) - set(study.datasets)):
        drop = " ".join(f"~study.dataset_overrides.{d}" for d in extra)
        raise StudyError(f"study {study.name}: dataset_overrides names {extra}, which are not among datasets "
                         f"{list(study.datasets)} (a typo in the study file, or data sets left out on the command "
                         f"line: then leave their overrides out too, {drop})")
    if study.published is not None and any(len(r) != len(study.published.header) for r in study.published.rows):
        raise StudyError(f"study {study.name}: every row of published.rows needs {len(study.published.header)} cells "
                         "(one per header entry)")
    for arm in study.arms:
        if arm.seeds is not None and (extra := sorted(set(arm.seeds) - set(study.seeds))):
            raise StudyError(f"study {study.name}, arm {arm.name!r}: its seeds {extra} are not reporting seeds "
                             f"{list(study.seeds)}; an arm's seeds are a subset of the study's")
        if arm.datasets is not None and (extra := sorted(set(arm.datasets) - set(study.datasets))):
            raise StudyError(f"study {study.name}, arm {arm.name!r}: its datasets {extra} are not among the "
                             f"study's datasets {list(study.datasets)}")
        if arm.steps is not None and (arm.steps <= 0 or arm.steps % b.eval_every or arm.steps % b.chunk):
            raise StudyError(f"study {study.name}, arm {arm.name!r}: its steps ({arm.steps}) must be a positive "
                             f"multiple of budget.eval_every ({b.eval_every}) and of budget.chunk ({b.chunk})")
    for arm, left_out in study.exclude_seeds.items():
        if arm not in names or (extra := sorted(set(left_out) - set(study.seeds))):
            raise StudyError(f"study {study.name}: exclude_seeds names arm {arm!r} with seeds {list(left_out)}; "
                             f"its keys must be arms ({names}) and its seeds reporting seeds {list(study.seeds)}")
    if study.detection is not None:
        check_detection(study)
    if study.factorial is not None and (len(study.factorial.cells) != 4 or set(study.factorial.cells) - set(names)):
        raise StudyError(f"study {study.name}: factorial.cells must name 4 arms of the study (got "
                         f"{list(study.factorial.cells)}; arms: {names})")
    for col in [study.endpoint, *study.columns]:
        if col.spread not in SPREADS or col.reduce not in REDUCES:
            raise StudyError(f"study {study.name}: column {col.score}: spread must be one of {SPREADS} (got "
                             f"{col.spread!r}) and reduce one of {REDUCES} (got {col.reduce!r})")
        if col.last < 1:
            raise StudyError(f"study {study.name}: the window of {col.score} (last) must be >= 1, got {col.last}")
        baseline = study.baseline_rows and not col.score.startswith(DATA_PREFIX)
        names = [col.score, *([f"{DATA_PREFIX}{col.score}"] if baseline else [])]
        for name in sorted({arm_score(a, n) for a in study.arms for n in names}):
            base = name.removeprefix(DATA_PREFIX)
            if base not in (study.data_scores if name.startswith(DATA_PREFIX) else study.scores):
                raise StudyError(f"study {study.name}: table score {name!r} is not collected; add "
                                 f"{base!r} to {'data_scores' if name.startswith(DATA_PREFIX) else 'scores'} "
                                 f"(now {list(study.scores)}, data_scores {list(study.data_scores)})")


#: What an override may set a seed key to: the job's own seed (``seed=`` is added by :func:`ganlab.study.plan.overrides`
#: from the job's tuning or reporting seed), by interpolation, e.g. ``dataset.seed=${seed}``.
JOB_SEED = "${seed}"


def _override_routes(study: StudySchema) -> list[tuple[str, list[str]]]:
    """Every override list a job may get besides its seed and budget, each with where it comes from."""
    routes = [("common", list(study.common))]
    routes += [(f"dataset_overrides.{d}", list(o)) for d, o in study.dataset_overrides.items()]
    if study.tuning is not None:
        routes.append(("tuning.axis.overrides", list(study.tuning.axis.overrides)))
    for arm in study.arms:
        routes.append((f"arm {arm.name!r} overrides", list(arm.overrides)))
        if arm.axis_overrides is not None:
            routes.append((f"arm {arm.name!r} axis_overrides", list(arm.axis_overrides)))
    return routes


def check_seed_overrides(study: StudySchema) -> None:
    """Refuse every route by which a run would draw another job's random numbers: an override of a key ending in
    ``seed`` (``seed``, ``dataset.seed``, ``strategy.ema.bn_seed``, ...) to anything but the job's own seed
    (:data:`JOB_SEED`), which would make reporting runs reuse the tuning runs' data or draws (or every run share
    one seed); and ``trainer.ensemble`` (one job trains seeds seed, ..., seed+S-1: other jobs' seeds).

    Raises:
        StudyError: naming the route (``common``, the arm, ...), the override and how to fix it.
    """
    for where, lines in _override_routes(study):
        for line in lines:
            key, _, value = line.partition("=")
            key = key.lstrip("+~").split("@", 1)[0].strip()
            leaf = key.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
            if leaf.lower().endswith("seed") and value.strip() != JOB_SEED:
                raise StudyError(f"study {study.name}, {where}: {line!r} sets a seed key ({key}); every run's seeds "
                                 "come from its job's seed (tuning seeds, then reporting seeds, disjoint), and a "
                                 "fixed value would let the reporting runs reuse the tuning runs' data and draws: "
                                 f"remove it (its default follows the job's seed or is one value for every run), "
                                 f"or derive it from the job's seed: {key}=\\{JOB_SEED} in the study file (the "
                                 "backslash leaves the interpolation to ganlab-train)")
            if key == "trainer.ensemble" and value.strip() not in ("null", "1", ""):
                raise StudyError(f"study {study.name}, {where}: {line!r}: an ensemble trains seeds seed, seed+1, "
                                 "... in one job, which may be other jobs' (tuning or reporting) seeds; a study runs "
                                 "one seed a job: remove it")


def check_detection(study: StudySchema) -> None:
    """The ``detection`` section: fit and image data sets among the study's, label scores for every data set,
    fractions and level in (0, 1), at least one bootstrap resample.

    Raises:
        StudyError: naming the first problem.
    """
    det = study.detection
    assert det is not None
    for key in ("fit_on", "image_sets"):
        if extra := sorted(set(getattr(det, key)) - set(study.datasets)):
            raise StudyError(f"study {study.name}: detection.{key} names {extra}, not among datasets "
                             f"{list(study.datasets)}")
    for label in det.labels:
        if missing := sorted(set(study.datasets) - set(label.scores)):
            raise StudyError(f"study {study.name}: label {label.name!r} has no score for {missing}; give "
                             "scores.<data set>: <evals.csv column> for every data set")
        if not 0 < label.effective_fraction < 1 or label.warmup < 0:
            raise StudyError(f"study {study.name}: label {label.name!r} needs 0 < effective_fraction < 1 and "
                             f"warmup >= 0 (got {label.effective_fraction}, {label.warmup})")
    if det.bootstrap.resamples < 1 or not 0 < det.bootstrap.level < 1:
        raise StudyError(f"study {study.name}: detection.bootstrap needs resamples >= 1 and 0 < level < 1 (got "
                         f"{det.bootstrap.resamples}, {det.bootstrap.level})")


def register() -> None:
    """Store :class:`StudySchema` in Hydra's ConfigStore as ``schema/study`` (idempotent)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="schema", name="study", node=StudySchema, provider="ganlab")
