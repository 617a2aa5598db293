"""The collapse detector's rules on hand-made score sequences: each fires exactly when its definition says."""

from __future__ import annotations

import pytest

from ganlab.callbacks.detector import CollapseDetector, DetectorConfig

NOW = DetectorConfig(from_step=0)  # judge from the first evaluation (the default waits until step 1,000)

RING = {"data/modes_covered": 8.0, "data/clusters_covered": 8.0, "data/high_similarity_fraction": 0.12}
IMAGES = {"data/modes_covered": 10.0, "data/clusters_covered": 10.0, "data/high_similarity_fraction": 0.05,
          "data/duplicate_fraction": 0.0}


def rules(found: list) -> list[str]:
    return [f.rule for f in found]


def test_collapsed_from_the_first_evaluation_is_flagged_at_once() -> None:
    det = CollapseDetector(NOW, points=True)
    found = det.observe(1000, {"modes_covered": 1.0, "clusters_covered": 1.0, "high_similarity_fraction": 1.0} | RING)
    assert rules(found) == ["coverage", "coverage"]
    assert found[0].values == {"modes_covered": 1.0, "data/modes_covered": 8.0}
    assert det.verdict(num_modes=8) == ("collapsed: 1 of 8 modes (data 8), 1 clusters (data 8); rules: coverage; "
                                        "first alarm at step 1000")


def test_coverage_threshold_is_half_the_data_baseline() -> None:
    det = CollapseDetector(NOW, points=True)
    assert rules(det.observe(1, {"modes_covered": 4.0} | RING)) == []        # 4 = 0.5 x 8: not below
    assert rules(det.observe(2, {"modes_covered": 3.0} | RING)) == ["coverage"]
    assert det.verdict(8).startswith("collapsed: 3 of 8 modes (data 8)")


def test_cosine_rules_are_skipped_on_points_and_apply_to_images() -> None:
    scores = {"modes_covered": 10.0, "clusters_covered": 10.0, "high_similarity_fraction": 0.31}
    assert rules(CollapseDetector(NOW, points=True).observe(1, scores | RING)) == []
    found = CollapseDetector(NOW).observe(1, scores | IMAGES)
    assert rules(found) == ["similarity"] and "31% of sample pairs" in found[0].message
    # the rule needs the data's own fraction below the threshold (else similarity says nothing about G)
    assert rules(CollapseDetector(NOW).observe(1, scores | IMAGES | {"data/high_similarity_fraction": 0.4})) == []


def test_duplicates_above_threshold_and_data() -> None:
    det = CollapseDetector(NOW)
    assert rules(det.observe(1, {"duplicate_fraction": 0.1} | IMAGES)) == []   # not above 0.1
    assert rules(det.observe(2, {"duplicate_fraction": 0.25} | IMAGES)) == ["duplicates"]


def test_coverage_drop_from_best_is_a_trend_not_a_presence() -> None:
    det = CollapseDetector(NOW, points=True)
    for step, m in [(1, 6.0), (2, 8.0), (3, 5.0)]:
        assert rules(det.observe(step, {"modes_covered": m} | RING)) == []
    found = det.observe(4, {"modes_covered": 4.0} | RING)                     # 4 <= 0.5 x best 8
    assert rules(found) == ["coverage_drop"] and not found[0].presence
    assert det.verdict(8).startswith("healthy: 4 of 8 modes") and det.first_alarm_step == 4


def test_similarity_rising_three_times_in_a_row() -> None:
    det = CollapseDetector(NOW)
    base = {"modes_covered": 10.0} | IMAGES
    seq = [0.05, 0.08, 0.11, 0.14]       # three rises of 0.03 > min_rise 0.02
    assert [rules(det.observe(i, base | {"high_similarity_fraction": v})) for i, v in enumerate(seq)] == \
        [[], [], [], ["similarity_rising"]]
    assert rules(det.observe(5, base | {"high_similarity_fraction": 0.18})) == ["similarity_rising"]  # 4th rise
    assert rules(det.observe(6, base | {"high_similarity_fraction": 0.19})) == []  # +0.01: streak broken


def test_mode_hopping_needs_a_changed_and_small_set() -> None:
    det = CollapseDetector(NOW, points=True)
    s = {"modes_covered": 2.0} | RING
    det.observe(1, s, covered={0, 1})
    assert "mode_hopping" in rules(det.observe(2, s, covered={3, 4}))
    assert "mode_hopping" not in rules(det.observe(3, s, covered={3, 4}))          # unchanged
    wide = {"modes_covered": 6.0} | RING
    det.observe(4, wide, covered={0, 1, 2, 3, 4, 5})
    assert "mode_hopping" not in rules(det.observe(5, wide, covered={1, 2, 3, 4, 5, 6}))  # changed, but 6 >= 4


def test_mode_hopping_compares_cluster_ids_with_the_data_clusters() -> None:
    """Images: the ids are k-means clusters, so their count is judged against ``data/clusters_covered`` (100 on
    stacked data), not the data's 989 of 1,000 modes (which called 99 clusters "small": a healthy run hopped)."""
    stacked = {"data/modes_covered": 989.0, "data/clusters_covered": 100.0, "data/high_similarity_fraction": 0.02}
    det = CollapseDetector(NOW, points=False)
    s = {"modes_covered": 983.0, "clusters_covered": 99.0} | stacked
    det.observe(1, s, covered=set(range(99)))
    assert "mode_hopping" not in rules(det.observe(2, s, covered=set(range(1, 100))))  # 99 >= 50 clusters
    few = {"modes_covered": 40.0, "clusters_covered": 3.0} | stacked
    det.observe(3, few, covered={0, 1, 2})
    assert "mode_hopping" in rules(det.observe(4, few, covered={5, 6, 7}))            # 3 < 50 clusters


def test_state_round_trip_keeps_trends() -> None:
    det = CollapseDetector(NOW, points=True)
    det.observe(1, {"modes_covered": 8.0} | RING, covered=set(range(8)))
    other = CollapseDetector(NOW, points=True)
    other.load_state_dict(det.state_dict())
    assert rules(other.observe(2, {"modes_covered": 4.0} | RING)) == ["coverage_drop"]


@pytest.mark.parametrize("key,value", [("coverage_fraction", 0.0), ("drop_fraction", 1.0), ("patience", 0)])
def test_bad_thresholds_name_the_key(key: str, value: float) -> None:
    with pytest.raises(ValueError, match="callbacks.collapse_detector"):
        CollapseDetector(DetectorConfig(**{key: value}))


def test_evaluations_before_from_step_are_not_judged() -> None:
    det = CollapseDetector(points=True)  # from_step 1000
    assert rules(det.observe(500, {"modes_covered": 0.0} | RING)) == [] and det.verdict() == (
        "not judged: the detector judges evaluations from step 1000 on (callbacks.collapse_detector.from_step)")
    assert rules(det.observe(1000, {"modes_covered": 0.0} | RING)) == ["coverage"]
    assert det.first_alarm_step == 1000


def test_covered_ids_of_modes_and_of_clusters() -> None:
    """Mixtures: modes with an HQ sample (within 3 std); images: clusters with >= 1 sample and >= 0.1 / k of them."""
    from types import SimpleNamespace

    import torch

    from ganlab.callbacks.covered import covered_ids
    from ganlab.data.base import Mixture
    from ganlab.metrics.numeric.kmeans import KMeansResult

    means = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = torch.tensor([[0.05, 0.0], [10.2, 0.0], [0.0, 12.0]])  # mode 2's sample is 20 std away: not HQ
    data = SimpleNamespace(mixture=Mixture(means, 0.1), num_modes=3)
    assert covered_ids(SimpleNamespace(samples=points), data, None) == {0, 1}
    # 3 clusters (default_num_clusters(3) = 3); 100 samples: 95 near centre 0, 4 near 1, 1 near 2; 0.1 / 3 x 100 = 3.3
    emb = torch.cat([means[:1].repeat(95, 1), means[1:2].repeat(4, 1), means[2:].repeat(1, 1)])
    fit = KMeansResult(centers=means, labels=torch.zeros(0, dtype=torch.long), inertia=0.0, n_iter=0)
    evaluator = SimpleNamespace(reference_clusters=lambda k: fit)
    images = SimpleNamespace(mixture=None, num_modes=3)
    assert covered_ids(SimpleNamespace(embeddings=emb), images, evaluator) == {0, 1}
