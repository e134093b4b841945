//! Inline SVG charts drawn on the server: lines over time with an optional target line,
//! and horizontal bars. Each chart's `<svg>` says how many data points it holds in
//! `data-points`, which the browser test reads.

use maud::{Markup, html};

const WIDTH: f64 = 400.0;
const HEIGHT: f64 = 190.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 26.0;
/// Colour-blind-safe (Okabe-Ito) colours, by series.
const COLOURS: &[&str] = &[
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

/// The colour of the `i`-th series.
pub fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// One line: `(seconds since the Unix epoch, value)` points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A horizontal line the series are judged against.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub value: f64,
    pub label: &'static str,
}

/// The y axis: from `floor` (else 0) up to at most `cap` (else as far as the data go).
#[derive(Debug, Clone, Copy, Default)]
pub struct Range {
    pub floor: Option<f64>,
    pub cap: Option<f64>,
}

/// A line chart of `series` over the time from the earliest point to `now_s`, with the
/// y axis in `unit` from 0 (or `floor`) up; `targets` sorted by value.
pub fn lines(
    title: &str,
    unit: &str,
    series: &[Series],
    targets: &[Target],
    range: Range,
    now_s: f64,
) -> Markup {
    let points: usize = series.iter().map(|s| s.points.len()).sum();
    let all = series.iter().flat_map(|s| s.points.iter());
    let start = all.clone().map(|p| p.0).fold(now_s, f64::min);
    let span = (now_s - start).max(60.0);
    let top = all
        .clone()
        .map(|p| p.1)
        .chain(targets.iter().map(|t| t.value))
        .fold(f64::MIN, f64::max);
    let bottom = range.floor.unwrap_or(0.0);
    let top = nice_ceiling(if top > bottom { top } else { bottom + 1.0 }, bottom);
    let top = range.cap.map_or(top, |cap| top.min(cap));
    let x = |t: f64| LEFT + (t - (now_s - span)) / span * (WIDTH - LEFT - RIGHT);
    let y = |v: f64| TOP + (1.0 - (v - bottom) / (top - bottom)) * (HEIGHT - TOP - BOTTOM);
    let ticks: Vec<f64> = (0..=4)
        .map(|i| bottom + (top - bottom) * f64::from(i) / 4.0)
        .collect();
    html! {
        figure.chart {
            figcaption { (title) span.unit { " (" (unit) ")" } }
            svg viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(title)
                data-points=(points) data-chart=(title) {
                @for v in &ticks {
                    line.grid x1=(LEFT) x2=(WIDTH - RIGHT) y1=(fmt(y(*v))) y2=(fmt(y(*v))) {}
                    text.tick x=(LEFT - 4.0) y=(fmt(y(*v) + 4.0)) text-anchor="end" { (short(*v)) }
                }
                @for minutes in minute_ticks(span) {
                    text.tick x=(fmt(x(now_s - minutes * 60.0))) y=(HEIGHT - 6.0) text-anchor="middle" {
                        @if minutes == 0.0 { "now" } @else { "−" (minutes) " min" }
                    }
                }
                @if targets.len() > 2 {
                    // Many targets: one band from the lowest to the highest, one label.
                    @let (low, high) = (targets[0].value, targets[targets.len() - 1].value);
                    rect.band x=(LEFT) width=(WIDTH - LEFT - RIGHT) y=(fmt(y(high))) height=(fmt((y(low) - y(high)).max(1.0))) {}
                    text.target x=(WIDTH - RIGHT - 2.0) y=(fmt(y(high) - 3.0)) text-anchor="end" {
                        (targets[0].label) "s " (short(low)) "–" (short(high))
                    }
                } @else {
                    @for t in targets {
                        line.target x1=(LEFT) x2=(WIDTH - RIGHT) y1=(fmt(y(t.value))) y2=(fmt(y(t.value))) {}
                        text.target x=(WIDTH - RIGHT - 2.0) y=(fmt(y(t.value) - 3.0)) text-anchor="end" { (t.label) " " (short(t.value)) }
                    }
                }
                @for (i, s) in series.iter().enumerate() {
                    @if s.points.len() == 1 {
                        circle cx=(fmt(x(s.points[0].0))) cy=(fmt(y(s.points[0].1))) r="2.5" fill=(colour(i)) {}
                    } @else {
                        polyline fill="none" stroke=(colour(i)) stroke-width="2.2"
                            points=(path(&s.points, &x, &y)) {}
                    }
                }
                @if points == 0 {
                    text.empty x=(WIDTH / 2.0) y=(HEIGHT / 2.0) text-anchor="middle" { "no data yet" }
                }
            }
            (legend(series))
        }
    }
}

/// Horizontal bars, one per `(label, value)`, against a `limit` mark (e.g. Pf).
pub fn bars(title: &str, unit: &str, bars: &[(String, f64)], limit: Option<Target>) -> Markup {
    let row = 24.0;
    let height = TOP + row * bars.len().max(1) as f64 + BOTTOM;
    let label_width = 110.0;
    let top = bars
        .iter()
        .map(|b| b.1)
        .chain(limit.map(|l| l.value))
        .fold(f64::MIN, f64::max);
    let top = nice_ceiling(if top > 0.0 { top } else { 1.0 }, 0.0);
    let x = |v: f64| label_width + v / top * (WIDTH - label_width - RIGHT - 40.0);
    html! {
        figure.chart {
            figcaption { (title) span.unit { " (" (unit) ")" } }
            svg viewBox={ "0 0 " (WIDTH) " " (fmt(height)) } role="img" aria-label=(title)
                data-points=(bars.len()) data-chart=(title) {
                @for (i, (label, value)) in bars.iter().enumerate() {
                    @let y = TOP + row * i as f64;
                    text.tick x=(label_width - 6.0) y=(fmt(y + 16.0)) text-anchor="end" { (label) }
                    rect x=(label_width) y=(fmt(y + 3.0)) width=(fmt((x(*value) - label_width).max(1.0))) height="17" fill=(colour(i)) {}
                    text.value x=(fmt(x(*value) + 4.0)) y=(fmt(y + 16.0)) { (short(*value)) }
                }
                @if let Some(l) = limit {
                    line.target x1=(fmt(x(l.value))) x2=(fmt(x(l.value))) y1=(TOP) y2=(fmt(height - BOTTOM)) {}
                    text.target x=(fmt(x(l.value))) y=(fmt(height - 8.0)) text-anchor="middle" { (l.label) " " (short(l.value)) }
                }
                @if bars.is_empty() {
                    text.empty x=(WIDTH / 2.0) y=(fmt(height / 2.0)) text-anchor="middle" { "no data yet" }
                }
            }
        }
    }
}

fn legend(series: &[Series]) -> Markup {
    html! {
        ul.legend {
            @for (i, s) in series.iter().enumerate() {
                li { span.swatch style={ "background:" (colour(i)) } {} (s.name) }
            }
        }
    }
}

fn path(points: &[(f64, f64)], x: &impl Fn(f64) -> f64, y: &impl Fn(f64) -> f64) -> String {
    points
        .iter()
        .map(|&(t, v)| format!("{},{}", fmt(x(t)), fmt(y(v))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Minutes before now to label on an axis spanning `span` seconds.
fn minute_ticks(span: f64) -> Vec<f64> {
    let minutes = span / 60.0;
    let step = [1.0, 2.0, 5.0, 10.0, 15.0, 30.0]
        .into_iter()
        .find(|s| minutes / s <= 5.0)
        .unwrap_or(60.0);
    (0..)
        .map(|i| f64::from(i) * step)
        .take_while(|m| *m <= minutes)
        .collect()
}

/// The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least `v` (above
/// `bottom`).
fn nice_ceiling(v: f64, bottom: f64) -> f64 {
    let range = v - bottom;
    if range <= 0.0 || !range.is_finite() {
        return bottom + 1.0;
    }
    let power = 10f64.powf(range.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= range)
        .unwrap_or(10.0 * power);
    bottom + step
}

/// A coordinate with one decimal.
fn fmt(v: f64) -> String {
    format!("{v:.1}")
}

/// A value for a label: three significant digits at most.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_are_round() {
        assert_eq!(nice_ceiling(7.3, 0.0), 10.0);
        assert_eq!(nice_ceiling(0.42, 0.0), 0.5);
        assert_eq!(nice_ceiling(180.0, 0.0), 200.0);
        assert_eq!(nice_ceiling(0.95, 0.8), 1.0);
    }

    #[test]
    fn a_chart_counts_its_points() {
        let series = [Series {
            name: "a".into(),
            points: vec![(0.0, 1.0), (5.0, 2.0)],
        }];
        let svg = lines("t", "rps", &series, &[], Range::default(), 10.0).into_string();
        assert!(svg.contains("data-points=\"2\""), "{svg}");
        assert!(svg.contains("<polyline"));
        let empty = lines("t", "rps", &[], &[], Range::default(), 10.0).into_string();
        assert!(empty.contains("data-points=\"0\"") && empty.contains("no data yet"));
    }
}
