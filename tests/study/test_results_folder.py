"""Where a study's evaluations.csv, tables and page go (``results``): under its run folder unless its YAML says
otherwise, so a user's own study stays out of docs/results (the site's Results menu); the shipped studies keep
their pages in the docs."""

from __future__ import annotations

from omegaconf import OmegaConf

from ganlab.study.catalog import load_study, shipped_studies
from ganlab.study.schema import StudySchema


def _study(**keys: object) -> StudySchema:
    """A user's study as its YAML would declare it: the schema's defaults for every key not given."""
    given = {"name": "my_study", "arms": [{"name": "GAN"}], "datasets": ["ring8"], "seeds": [0],
             "budget": {"steps": 100, "eval_every": 50, "chunk": 100}, "control": "GAN", **keys}
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(StudySchema), given))


def test_a_study_that_does_not_set_results_writes_under_its_run_folder() -> None:
    assert _study().results == "runs/study/my_study/results"
    assert _study(runs="/data/mine").results == "/data/mine/results"  # follows the runs folder
    assert _study(results="docs/results/my_study").results == "docs/results/my_study"  # asked for: the docs


def test_the_shipped_studies_keep_their_pages_in_the_docs() -> None:
    results = {name: load_study(name).results for name in shipped_studies()}
    variants = {"fair_table_3lrs": "fair_table", "fair_table_last5": "fair_table",  # report beside their parent
                "rollback_study_clusters": "rollback_study", "rollback_study_last5": "rollback_study",
                "rollback_study_reread": "rollback_study", "rollback_study_reread_heldout": "rollback_study"}
    want = {name: f"docs/results/{variants.get(name, name)}" for name in results}
    want["smoke"] = "runs/study/smoke/results"  # the quick example writes no page into the docs
    assert results == want
