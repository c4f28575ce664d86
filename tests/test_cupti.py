from nvgg.profiling.cupti import Activity, summarize


def test_summary_of_overlapping_and_gapped_activities():
    acts = [Activity("a", "kernel", 0, 10_000), Activity("b", "kernel", 5_000, 12_000), Activity("c", "kernel", 20_000, 23_000)]
    s = summarize(acts)
    assert s.activities == 3
    assert s.busy_us == 15.0 and s.sum_us == 20.0 and s.span_us == 23.0 and s.idle_us == 8.0


def test_summary_of_nothing():
    assert summarize([]).span_us == 0.0
