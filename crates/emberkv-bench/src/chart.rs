//! SVG charts of a result set, drawn with plotters: throughput bars and
//! latency percentile curves for each workload of each scenario.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;

use crate::engines::Kind;
use crate::report::{Cell, Report, Status, chart_base, remove_outputs, thousands};

/// Width of every chart, in pixels.
const WIDTH: u32 = 800;
/// Height of one bar of a throughput chart, in pixels.
const BAR_HEIGHT: u32 = 36;
/// Bar colour of stores.
const STORE: RGBColor = RGBColor(0x2b, 0x6c, 0xb0);
/// Bar colour of reference rails.
const RAIL: RGBColor = RGBColor(0xa0, 0xa0, 0xa0);

/// Draws both charts of every measured workload of `report` into `dir`,
/// named `<scenario>-<workload>-throughput.svg` and `…-latency.svg`,
/// in place of the charts `dir` held.
pub fn draw_all(report: &Report, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    remove_outputs(dir, "svg")?;
    for s in &report.scenarios {
        for &w in &s.workloads {
            let mut cells: Vec<&Cell> = report
                .cells
                .iter()
                .filter(|c| c.scenario == s.name && c.workload == w)
                .filter(|c| c.status == Status::Ok && c.metrics.is_some())
                .collect();
            if cells.is_empty() {
                continue;
            }
            cells.sort_by(|a, b| {
                let key = |c: &Cell| (c.kind != Kind::Store, -rate(c));
                key(a)
                    .partial_cmp(&key(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            let title = format!("{w} — {} — {}", s.shape(), report.harness.durability);
            let base = chart_base(&s.name, w);
            let path = dir.join(format!("{base}-throughput.svg"));
            // The no-op floor runs several times faster than any store: on
            // one axis it would squash every other bar. It stays in tables.
            let charted: Vec<&Cell> = cells
                .iter()
                .copied()
                .filter(|c| c.kind != Kind::Floor)
                .collect();
            throughput(&charted, &title, &path)
                .with_context(|| format!("drawing {}", path.display()))?;
            let path = dir.join(format!("{base}-latency.svg"));
            latency(&cells, &title, &path)
                .with_context(|| format!("drawing {}", path.display()))?;
        }
    }
    Ok(())
}

fn rate(c: &Cell) -> f64 {
    c.metrics.as_ref().map_or(0.0, |m| m.ops_per_sec)
}

fn label(c: &Cell) -> String {
    match c.kind {
        Kind::Store => c.engine.clone(),
        Kind::Ceiling | Kind::Floor => format!("{} (rail)", c.engine),
    }
}

/// Horizontal bars of throughput, stores by rank then the ceiling rail.
fn throughput(cells: &[&Cell], title: &str, path: &Path) -> Result<()> {
    let n = cells.len();
    let height = 90 + BAR_HEIGHT * n as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = cells.iter().map(|c| rate(c)).fold(1.0, f64::max) * 1.2;
    let labels: Vec<String> = cells.iter().map(|c| label(c)).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: throughput"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(140)
        .build_cartesian_2d(0.0..max, (0..n).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_label_formatter(&|x| thousands(x.round() as u64))
        .x_desc("operations per second")
        .draw()?;
    chart.draw_series(cells.iter().enumerate().map(|(i, c)| {
        let colour = if c.kind == Kind::Store { STORE } else { RAIL };
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(i)),
                (rate(c), SegmentValue::Exact(i + 1)),
            ],
            colour.filled(),
        );
        bar.set_margin(5, 5, 0, 0);
        bar
    }))?;
    chart.draw_series(cells.iter().enumerate().map(|(i, c)| {
        Text::new(
            format!(" {}", thousands(rate(c).round() as u64)),
            (rate(c), SegmentValue::CenterOf(i)),
            ("sans-serif", 13),
        )
    }))?;
    root.present()?;
    Ok(())
}

/// The x position of quantile `q` on a percentile axis: its "nines",
/// `-log10(1 - q)` (p90 is 1, p99 is 2, p99.9 is 3).
fn nines(q: f64) -> f64 {
    -(1.0 - q).max(1e-9).log10()
}

/// The percentile at `x` nines, as a label: `p50`, `p99`, `p99.9`.
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    let text = format!("{p:.3}");
    format!("p{}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// Latency percentile curves, one line per engine, on a log scale.
fn latency(cells: &[&Cell], title: &str, path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (WIDTH, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let points: Vec<Vec<(f64, f64)>> = cells
        .iter()
        .map(|c| {
            c.metrics.as_ref().map_or_else(Vec::new, |m| {
                m.latency_curve
                    .iter()
                    .map(|&(q, us)| (nines(q), us.max(0.01)))
                    .collect()
            })
        })
        .collect();
    let all = points.iter().flatten().map(|&(_, us)| us);
    let lo = all.clone().fold(f64::INFINITY, f64::min).max(0.01) / 1.5;
    let hi = all.fold(0.02, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: latency percentiles"), ("sans-serif", 18))
        .margin(10)
        // Room for the last percentile label, centred on the axis' end.
        .margin_right(30)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(nines(0.5)..nines(0.9999), (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(6)
        .x_label_formatter(&|x| percentile_label(*x))
        .y_desc("latency (µs)")
        .x_desc("percentile")
        .draw()?;
    for (i, (c, line)) in cells.iter().zip(points).enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let style = if c.kind == Kind::Store {
            colour.stroke_width(2)
        } else {
            colour.stroke_width(1)
        };
        chart
            .draw_series(LineSeries::new(line, style))?
            .label(label(c))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_axis() {
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert_eq!(percentile_label(nines(0.5)), "p50");
        assert_eq!(percentile_label(2.0), "p99");
        assert_eq!(percentile_label(3.0), "p99.9");
        assert_eq!(percentile_label(nines(0.9999)), "p99.99");
        assert_eq!(percentile_label(4.0), "p99.99");
    }
}
