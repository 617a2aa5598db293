"""The collapse corpus's CSVs derived from its run folders (``ganlab-study collect`` of a study with ``detection``).

Each finished run folder (a ``ganlab-train`` folder trained with ``callbacks=[default,collapse_corpus]``) gives one
``runs.csv`` row (``cpu``: the CPU capability it ran on, :func:`ganlab.study.collect.cpu_of`), its ``evals.csv`` rows
(``metrics.jsonl``'s scores and health joined with ``corpus_labels.jsonl`` by step) and its ``signals.csv`` rows
(``corpus_signals.jsonl``); the run's label is :func:`ganlab.study.labels.coverage_label` of its fresh-sample
coverage. Runs already in the committed CSVs whose folder is absent stay as committed (their folders are not kept);
a folder's run replaces a committed run of the same name. The three files are written atomically
(:func:`ganlab.study.corpus.write_corpus`). The committed runs are the study's recorded rows
(:func:`recorded_corpus`): the runner skips them and ``ganlab-study status`` counts them finished, as a study's
committed ``evaluations.csv`` rows.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from ganlab import layout
from ganlab.study.collect import Recorded, by_step, cpu_of, job_key
from ganlab.study.corpus import Row, read_raw, write_corpus
from ganlab.study.labels import coverage_label
from ganlab.study.plan import Job, final_jobs, folder, overrides, steps_of
from ganlab.study.runner import finished_step
from ganlab.study.schema import StudySchema


def run_name(job: Job) -> str:
    """``<arm>_s<seed>``: the corpus's run name (arms are named ``<data set>_<strategy>_lr<lr>``)."""
    return f"{job.arm}_s{job.seed}"


def run_record(study: StudySchema, job: Job) -> dict[str, list[Row]] | None:
    """One finished run's ``{"summary": [row], "evals": rows, "signals": rows}``; None when its folder has not
    reached the arm's budget."""
    run_dir, name = folder(study, job), run_name(job)
    if (finished_step(run_dir) or 0) < steps_of(study, job.arm):
        return None
    labels = {r["step"]: r for r in by_step(run_dir / layout.CORPUS_LABELS_FILE)}
    evals = []
    for rec in layout.read_evaluations(run_dir):
        if not rec.get("scores"):
            continue
        lab = {k: v for k, v in labels.get(int(rec["step"]), {}).items() if k != "step"}
        evals.append({"run": name, "step": int(rec["step"]), **lab, **rec["scores"],
                      **{f"{layout.HEALTH_TAG_PREFIX}{k}": v for k, v in (rec.get("health") or {}).items()}})
    signals = [{"run": name, **s} for s in by_step(run_dir / layout.CORPUS_SIGNALS_FILE)]
    cfg = OmegaConf.load(run_dir / layout.HYDRA_DIR / layout.CONFIG_FILE)
    data_cov = float(evals[0]["label_data_coverage"]) if evals else float("nan")
    collapsed, drop = coverage_label([e["step"] for e in evals], [float(e["label_coverage"]) for e in evals], data_cov,
                                     study.detection.warmup if study.detection else 1000)
    jobs = layout.read_study_jobs(run_dir)
    summary = {"name": name, "dataset": job.dataset, "strategy": "+".join(cfg.strategy) or "plain",
               "lr": float(cfg.optim.discriminator.lr), "seed": job.seed, "steps": int(cfg.trainer.steps),
               "eval_every": int(cfg.trainer.eval_every), "monitor_every": int(cfg.monitor.every),
               "data_coverage": data_cov, "collapsed": int(collapsed), "drop_step": "" if drop is None else drop,
               "overrides": " ".join(overrides(study, job)),
               "wall_s": round(sum(float(j.get("wall_s") or 0) for j in jobs), 1), "cpu": cpu_of(run_dir)}
    return {"summary": [summary], "evals": evals, "signals": signals}


def collect_corpus(study: StudySchema) -> list[Path]:
    """Merge the finished run folders of ``study`` into the committed CSVs of ``study.detection.corpus`` (see the
    module docstring); runs sorted by name. Returns the three paths."""
    assert study.detection is not None
    out = Path(study.detection.corpus)
    runs = read_raw(out)
    for job in final_jobs(study):
        rec = run_record(study, job)
        if rec is not None:
            runs[run_name(job)] = rec
    return write_corpus(out, [runs[n] for n in sorted(runs)])


def recorded_corpus(study: StudySchema) -> Recorded:
    """The committed runs of ``study``'s corpus (``runs.csv``) as the study's recorded rows, by job: one row per run
    recorded at its arm's budget (``steps`` at least :func:`ganlab.study.plan.steps_of`), finished at that step, its
    ``wall_s`` (no commit: the run's whole wall time, as a former script's row) and ``cpu``; {} without a
    ``runs.csv``."""
    assert study.detection is not None
    committed = read_raw(Path(study.detection.corpus))
    out: Recorded = {}
    for job in final_jobs(study):
        run = committed.get(run_name(job))
        if run is None or int(float(run["summary"][0]["steps"])) < steps_of(study, job.arm):
            continue
        wall = run["summary"][0].get("wall_s") or ""
        out[job_key(job)] = [{"study": study.name, "arm": job.arm, "dataset": job.dataset, "stage": job.stage,
                              "seed": job.seed, "step": steps_of(study, job.arm), "finished": True, "commit": None,
                              "wall_s": float(wall) if wall else None,
                              "cpu": run["summary"][0].get("cpu") or None}]
    return out
