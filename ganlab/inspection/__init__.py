"""Look inside one run: which clusters its generator fills, what they look like, how similar its samples are.

The helpers behind ``notebooks/inspect_clusters.ipynb`` (and ``notebooks/compare_strategies.ipynb``'s choice of
sweep). Everything is computed by the library's own code: the run is rebuilt from its checkpoint's stored config
(:func:`ganlab.run.rebuild.rebuild_from_checkpoint`), scored by its own :class:`~ganlab.metrics.Evaluator`, and the
clusters are the k-means fit the ``clusters`` scorer uses, so every picture agrees with the run's scores::

    from ganlab import inspection as gi
    run = gi.load_run(gi.find_latest_run())          # a run directory of ganlab-train
    result = gi.evaluate_run(run)                    # EvalResult: scores, samples, embeddings
    clusters = gi.assign_clusters(run, result)
    real_counts, fake_counts = gi.cluster_occupancy(clusters)
    gi.plot_occupancy(real_counts, fake_counts)      # a matplotlib Figure

Plotting functions return ``matplotlib.figure.Figure`` objects made without pyplot, so they never change the
backend: a notebook shows one as a cell's value, a script saves it with ``fig.savefig(path)``.

Modules: :mod:`~ganlab.inspection.runs` (loading runs; finding them: :mod:`ganlab.layout`),
:mod:`~ganlab.inspection.clusters`,
:mod:`~ganlab.inspection.similarity` (histograms, most similar pairs, the scores table),
:mod:`~ganlab.inspection.plots` and :mod:`~ganlab.inspection.similarity_plots` (the figures).
"""

from __future__ import annotations

from ganlab.inspection.clusters import (
                                        ClusterAssignment,
                                        assign_class_clusters,
                                        assign_clusters,
                                        cluster_occupancy,
                                        fit_clusters,
                                        project_2d,
                                        samples_by_cluster,
)
from ganlab.inspection.plots import plot_occupancy, plot_projection, plot_samples_by_cluster
from ganlab.inspection.runs import LoadedRun, evaluate_run, list_checkpoints, load_run, resolve_user_path
from ganlab.inspection.similarity import (
                                        CheckpointHistogram,
                                        histograms_over_checkpoints,
                                        most_similar_pairs,
                                        scores_table,
                                        similarity_histograms,
)
from ganlab.inspection.similarity_plots import (
                                        plot_histograms_over_checkpoints,
                                        plot_most_similar_pairs,
                                        plot_similarity_histograms,
)
from ganlab.layout import find_latest_run, find_latest_sweep, find_runs_root, is_run_dir

__all__ = ["CheckpointHistogram", "ClusterAssignment", "LoadedRun", "assign_class_clusters", "assign_clusters",
           "cluster_occupancy",
           "evaluate_run", "find_latest_run", "find_latest_sweep", "find_runs_root", "fit_clusters",
           "histograms_over_checkpoints", "is_run_dir", "list_checkpoints", "load_run", "most_similar_pairs",
           "plot_histograms_over_checkpoints", "plot_most_similar_pairs", "plot_occupancy", "plot_projection",
           "plot_samples_by_cluster", "plot_similarity_histograms", "project_2d", "resolve_user_path",
           "samples_by_cluster", "scores_table", "similarity_histograms"]
