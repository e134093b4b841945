//! The tables measured on live processes, which `docs/results.md` includes in its
//! "measured live" sections: each tool writes its own under `OUT/measured/`, headed with
//! the date and the command that measured it, so that the page says where and when each
//! figure comes from. A tool run with `--runs N` measures N times and writes the median
//! run's table, its heading naming every run's figures and each figure's median, judged
//! against its goal where it has one ([`median_run`]): the machines are shared and noisy,
//! so one run is not a measurement, and the run that is the median by one figure need not
//! be by the others.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::stats::{median, said, upper_median};

/// One figure of a run that the heading quotes.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    /// Decimals to print it with.
    pub decimals: usize,
    /// The goal its median is judged against, if it has one.
    pub goal: Option<Goal>,
}

impl Figure {
    pub fn new(name: impl Into<String>, value: f64, decimals: usize) -> Self {
        Self {
            name: name.into(),
            value,
            decimals,
            goal: None,
        }
    }

    /// This figure, judged against `goal`.
    #[must_use]
    pub fn goal(self, goal: Goal) -> Self {
        Self {
            goal: Some(goal),
            ..self
        }
    }
}

/// A bound a figure should keep (an issue's goal).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

impl Goal {
    pub fn met(self, value: f64) -> bool {
        match self {
            Self::AtMost(limit) => value <= limit,
            Self::AtLeast(limit) => value >= limit,
        }
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AtMost(limit) => write!(f, "≤ {limit}"),
            Self::AtLeast(limit) => write!(f, "≥ {limit}"),
        }
    }
}

/// One run of a benchmark: its table and the figures its heading quotes, the first of
/// them the one the median run is chosen by.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub table: String,
    pub figures: Vec<Figure>,
}

/// The median of `runs` (given in the order they ran) by their first figure (of an even
/// count the upper one, as [`upper_median`]), and the note the heading gives it: every
/// run's figures in the order they ran, and each figure's own median with its goal's
/// verdict on it. No note for one run; `None` for none.
pub fn median_run(mut runs: Vec<Run>) -> Option<(Run, String)> {
    let key = |run: &Run| run.figures.first().map_or(f64::NAN, |f| f.value);
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| key(&runs[a]).total_cmp(&key(&runs[b])));
    let median_at = upper_median(&order)?;
    if runs.len() == 1 {
        return runs.pop().map(|run| (run, String::new()));
    }
    let quoted: Vec<String> = runs[median_at]
        .figures
        .iter()
        .enumerate()
        .map(|(i, figure)| {
            let figures: Vec<&Figure> = runs.iter().filter_map(|run| run.figures.get(i)).collect();
            let values: Vec<String> = figures
                .iter()
                .map(|f| format!("{:.*}", f.decimals, f.value))
                .collect();
            let mut sorted: Vec<f64> = figures.iter().map(|f| f.value).collect();
            let value = median(&mut sorted);
            let verdict = figure.goal.map_or_else(String::new, |goal| {
                format!("; goal {goal}: {}", said(goal.met(value)))
            });
            format!(
                "{} {} (median {:.*}{verdict})",
                figure.name,
                values.join(", "),
                figure.decimals,
                value
            )
        })
        .collect();
    let note = format!(
        " (run {} of {}, the median by the first figure below; each run's, in the order they ran, and each figure's median: {})",
        median_at + 1,
        runs.len(),
        quoted.join("; ")
    );
    Some((runs.swap_remove(median_at), note))
}

/// `runs` runs of `measure` (at least one), one after the other, in the order they ran.
pub async fn repeat<F, Fut>(runs: usize, mut measure: F) -> anyhow::Result<Vec<Run>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Run>>,
{
    let mut done = Vec::with_capacity(runs.max(1));
    for run in 1..=runs.max(1) {
        if runs > 1 {
            eprintln!("run {run} of {runs}");
        }
        done.push(measure().await?);
    }
    Ok(done)
}

/// [`median_run`] of `runs`: printed when there was more than one, and written to
/// `out/measured/file` when there is an `out`.
pub fn report(runs: Vec<Run>, out: Option<&Path>, file: &str) -> anyhow::Result<()> {
    let count = runs.len();
    let (median, note) = median_run(runs).context("no run")?;
    if count > 1 {
        println!("\nThe median run{note}:\n\n{}", median.table);
    }
    if let Some(out) = out {
        write(out, file, &note, &median.table)?;
    }
    Ok(())
}

/// Writes `body` to `out/measured/file`, after a line naming today's date (UTC), this
/// process's command line and `note` ([`median_run`]'s, or none). Returns the path written.
pub fn write(out: &Path, file: &str, note: &str, body: &str) -> anyhow::Result<PathBuf> {
    let dir = out.join("measured");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(file);
    let command: Vec<String> = std::env::args().collect();
    let date = time::OffsetDateTime::now_utc().date();
    std::fs::write(
        &path,
        format!(
            "Measured on {date} by `{}`{note}.\n\n{}",
            command.join(" "),
            body.trim_start()
        ),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(table: &str, rps: f64, cpu: f64) -> Run {
        Run {
            table: table.to_owned(),
            figures: vec![
                Figure::new("req/s", rps, 0),
                Figure::new("CPU per request (µs)", cpu, 1).goal(Goal::AtMost(400.0)),
            ],
        }
    }

    #[test]
    fn the_median_run_is_chosen_by_its_first_figure_and_every_figure_quoted_with_its_median() {
        let runs = vec![
            run("a", 3794.4, 401.41),
            run("b", 4200.0, 372.1),
            run("c", 3769.0, 398.2),
        ];
        let (median, note) = median_run(runs).expect("three runs");
        assert_eq!(median.table, "a");
        // The median run misses the CPU goal (401.4); the CPU's own median meets it.
        assert_eq!(
            note,
            " (run 1 of 3, the median by the first figure below; each run's, in the order \
             they ran, and each figure's median: req/s 3794, 4200, 3769 (median 3794); \
             CPU per request (µs) 401.4, 372.1, 398.2 (median 398.2; goal ≤ 400: met))"
        );
    }

    #[test]
    fn of_two_runs_the_upper_one_and_of_one_no_note() {
        let (median, _) =
            median_run(vec![run("low", 1.0, 0.0), run("high", 2.0, 0.0)]).expect("two runs");
        assert_eq!(median.table, "high");
        let (only, note) = median_run(vec![run("only", 1.0, 0.0)]).expect("one run");
        assert_eq!((only.table.as_str(), note.as_str()), ("only", ""));
        assert!(median_run(Vec::new()).is_none());
    }
}
