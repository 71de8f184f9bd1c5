//! Latency histograms: one per client thread, merged after a run.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency recorded exactly: 60 s, in nanoseconds. Longer operations
/// are recorded as 60 s.
const MAX_NANOS: u64 = 60_000_000_000;

/// Operation latencies in nanoseconds, to 3 significant figures.
#[derive(Clone, Debug)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(Histogram::new_with_bounds(1, MAX_NANOS, 3).expect("constant bounds are valid"))
    }
}

impl Latencies {
    /// Records one operation that took `took`.
    pub fn record(&mut self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.0.saturating_record(nanos.max(1));
    }

    /// Adds every sample of `other` (same bounds, so this cannot fail).
    pub fn merge(&mut self, other: &Latencies) {
        self.0.add(&other.0).expect("histograms share their bounds");
    }

    /// The latency at `quantile` (0.0 to 1.0), in microseconds.
    pub fn quantile_us(&self, quantile: f64) -> f64 {
        self.0.value_at_quantile(quantile) as f64 / 1_000.0
    }

    /// The percentile curve: `(quantile, microseconds)` at each of
    /// [`CURVE_QUANTILES`], for charts.
    pub fn curve(&self) -> Vec<(f64, f64)> {
        CURVE_QUANTILES
            .iter()
            .map(|&q| (q, self.quantile_us(q)))
            .collect()
    }
}

/// The quantiles of a latency curve: from the median to the 99.99th
/// percentile.
pub const CURVE_QUANTILES: [f64; 9] = [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_quantiles_follow() {
        let mut a = Latencies::default();
        let mut b = Latencies::default();
        for _ in 0..99 {
            a.record(Duration::from_micros(10));
        }
        b.record(Duration::from_millis(5));
        b.record(Duration::from_secs(600));
        a.merge(&b);
        assert_eq!(a.0.len(), 101);
        assert!((a.quantile_us(0.5) - 10.0).abs() < 0.01);
        assert!((a.quantile_us(0.99) - 5_000.0).abs() < 5.0);
        assert!((a.quantile_us(1.0) - 60_000_000.0).abs() < 60_000.0);
        let curve = a.curve();
        assert_eq!(curve.len(), CURVE_QUANTILES.len());
        assert!(curve.windows(2).all(|w| w[0].1 <= w[1].1));
    }
}
