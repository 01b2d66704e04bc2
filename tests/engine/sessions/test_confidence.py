"""Statistics of the benchmark harness against hand calculations and published t tables."""

import math

import pytest

from engine.sessions.confidence import betainc, median, summarize, t_cdf, t_quantile

# Two-sided 95 % critical values t(0.975, df) from the standard t table (NIST/SEMATECH e-Handbook).
T975 = {1: 12.7062047, 2: 4.3026527, 3: 3.1824463, 4: 2.7764451, 5: 2.5705818, 9: 2.2621572,
        10: 2.2281389, 20: 2.0859634, 30: 2.0422725, 100: 1.9839715, math.inf: 1.9599640}


@pytest.mark.parametrize("df,expected", sorted(T975.items()))
def test_t_quantile_matches_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-7)


def test_t_quantile_other_levels_and_symmetry():
    assert t_quantile(0.995, 5) == pytest.approx(4.0321430, abs=5e-7)  # 99 % two-sided
    assert t_quantile(0.95, 7) == pytest.approx(1.8945786, abs=5e-7)
    assert t_quantile(0.05, 7) == pytest.approx(-1.8945786, abs=5e-7)
    assert t_quantile(0.5, 3) == 0.0
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_quantile(0.9, 0)


def test_t_cdf_inverts_quantile_and_normal_limit():
    for df in (1, 3, 12, 50):
        assert t_cdf(t_quantile(0.9, df), df) == pytest.approx(0.9, abs=1e-12)
    assert t_cdf(1.959963984540054, math.inf) == pytest.approx(0.975, abs=1e-12)
    # df = 1 is the Cauchy distribution: CDF = 1/2 + atan(t)/pi
    assert t_cdf(2.0, 1) == pytest.approx(0.5 + math.atan(2.0) / math.pi, abs=1e-12)


def test_betainc_hand_values():
    # I_x(2, 3) = sum_{j=2}^{4} C(4, j) x^j (1-x)^(4-j); at x = 1/2: (6 + 4 + 1) / 16
    assert betainc(2, 3, 0.5) == pytest.approx(11 / 16, abs=1e-14)
    # I_x(1, 1) = x ; I_x(a, 1) = x^a
    assert betainc(1, 1, 0.3) == pytest.approx(0.3, abs=1e-14)
    assert betainc(3, 1, 0.7) == pytest.approx(0.343, abs=1e-14)
    assert betainc(2, 2, 0.0) == 0.0 and betainc(2, 2, 1.0) == 1.0


def test_summarize_one_to_five():
    s = summarize([1, 2, 3, 4, 5])
    assert (s.n, s.mean, s.median, s.min, s.max) == (5, 3.0, 3.0, 1.0, 5.0)
    sd = math.sqrt(10 / 4)  # squared deviations 4+1+0+1+4 over n-1
    assert s.stdev == pytest.approx(sd, rel=1e-15)
    assert s.cv == pytest.approx(sd / 3, rel=1e-15)
    half = 2.7764451 * sd / math.sqrt(5)
    assert s.ci95_half_width == pytest.approx(half, rel=1e-7)
    assert (s.ci95_low, s.ci95_high) == pytest.approx((3 - half, 3 + half), rel=1e-7)
    assert s.rel_ci95_half_width == pytest.approx(half / 3, rel=1e-7)


def test_summarize_even_count_and_single_sample():
    s = summarize([2, 4, 4, 4, 5, 5, 7, 9])
    assert s.median == 4.5 and s.mean == 5.0
    assert s.stdev == pytest.approx(math.sqrt(32 / 7), rel=1e-15)
    assert s.ci95_half_width == pytest.approx(2.3646243 * math.sqrt(32 / 7) / math.sqrt(8), rel=1e-7)
    one = summarize([7.0])
    assert one.stdev == 0.0 and math.isinf(one.ci95_half_width) and one.median == 7.0
    assert math.isinf(one.rel_ci95_half_width)
    with pytest.raises(ValueError):
        summarize([])
    assert median([3, 1, 2]) == 2 and median([4, 1, 3, 2]) == 2.5
