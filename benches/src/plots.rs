//! PNG plots for the results (the `plotters` crate): grouped bars, lines over time and
//! latency box plots; every figure of docs/results.md is one of these three.
//!
//! Text is drawn with DejaVu Sans (Debian's `fonts-dejavu-core`, which the scripts
//! install) through plotters' `ab_glyph` backend: its default font backend needs the
//! system's fontconfig libraries at build time.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::Context;
use plotters::prelude::*;
use plotters::style::FontStyle;

/// Where the font is looked for, first match wins.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

const SIZE: (u32, u32) = (960, 540);

/// Registers the font once for the whole process.
fn font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let path = FONTS
                .iter()
                .find(|p| Path::new(p).is_file())
                .ok_or_else(|| format!("no font at {FONTS:?}: install fonts-dejavu-core"))?;
            let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            // plotters keeps the font for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a font plotters can read"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

fn color(k: usize) -> RGBColor {
    const PALETTE: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    PALETTE[k % PALETTE.len()]
}

fn upper(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.filter(|v| v.is_finite()).fold(0.0_f64, f64::max);
    if max > 0.0 { max * 1.12 } else { 1.0 }
}

/// Grouped bars: one group per `groups` entry, one bar per series within it.
pub fn bars(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> anyhow::Result<()> {
    font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let n = groups.len().max(1);
    let top = upper(series.iter().flat_map(|(_, v)| v.iter().copied()));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5_f64..n as f64 - 0.5, 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                groups.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .label_style(("sans-serif", 15))
        .draw()?;
    let width = 0.8 / series.len().max(1) as f64;
    for (k, (name, values)) in series.iter().enumerate() {
        let c = color(k);
        chart
            .draw_series(values.iter().enumerate().map(|(g, &v)| {
                let x0 = g as f64 - 0.4 + k as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], c.filled())
            }))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// One line per series over a shared x axis; `vertical` marks an x (a failure, say).
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    vertical: Option<f64>,
) -> anyhow::Result<()> {
    font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let points = || series.iter().flat_map(|(_, p)| p.iter());
    let x_max = upper(points().map(|p| p.0)) / 1.12;
    let y_min = points().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let y_max = points().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let (y_min, y_max) = if y_min.is_finite() && y_max > y_min {
        let pad = (y_max - y_min) * 0.08;
        (y_min - pad, y_max + pad)
    } else {
        (0.0, 1.0)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max.max(1.0), y_min..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 15))
        .draw()?;
    for (k, (name, values)) in series.iter().enumerate() {
        let c = color(k);
        chart
            .draw_series(LineSeries::new(values.iter().copied(), c.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    if let Some(x) = vertical {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, y_min), (x, y_max)],
            BLACK.stroke_width(1),
        )))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// One box per series (quartiles, whiskers at 1.5 IQR), e.g. latency per scheme.
pub fn boxes(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[(String, &[f32])],
) -> anyhow::Result<()> {
    font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let quartiles: Vec<Quartiles> = series.iter().map(|(_, v)| Quartiles::new(v)).collect();
    let top = upper(quartiles.iter().map(|q| f64::from(q.values()[4])));
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    let n = names.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0_f32..top as f32)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                names.get(*i).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        })
        .y_desc(y_label)
        .label_style(("sans-serif", 15))
        .draw()?;
    chart.draw_series(quartiles.iter().enumerate().map(|(i, q)| {
        Boxplot::new_vertical(SegmentValue::CenterOf(i), q)
            .width(40)
            .style(color(i).stroke_width(2))
    }))?;
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_png_with_ink(path: &Path) -> bool {
        let bytes = std::fs::read(path).unwrap();
        bytes.starts_with(b"\x89PNG") && bytes.len() > 5_000
    }

    #[test]
    fn every_kind_of_plot_is_drawn() {
        let dir = std::env::temp_dir().join(format!("cocktail-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let groups = vec!["a".to_owned(), "b".to_owned()];
        bars(
            &dir.join("bars.png"),
            "bars",
            "y",
            &groups,
            &[("s".into(), vec![1.0, 2.0]), ("t".into(), vec![0.5, 3.0])],
        )
        .unwrap();
        lines(
            &dir.join("lines.png"),
            "lines",
            "x",
            "y",
            &[("s".into(), vec![(0.0, 1.0), (1.0, 2.0)])],
            Some(0.5),
        )
        .unwrap();
        let samples: Vec<f32> = (0..100).map(|i| i as f32).collect();
        boxes(
            &dir.join("boxes.png"),
            "boxes",
            "ms",
            &[("s".into(), &samples), ("t".into(), &samples[10..])],
        )
        .unwrap();
        for name in ["bars.png", "lines.png", "boxes.png"] {
            assert!(is_png_with_ink(&dir.join(name)), "{name}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
