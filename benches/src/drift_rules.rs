//! What each of Cocktail's tracking rules costs, against plain re-selection
//! (issue 34's "more than plain re-selection at no more inference", on
//! `sentiment-domains`): Cocktail's tracking replayed with its margin swept and its other
//! rules taken away one by one, at every label setting, on the drift replay
//! ([`crate::sim::drift`]).

use std::fmt::Write as _;

use anyhow::Context as _;

use cocktail_policy::tracking::TrackingConfig;

use crate::drift_report;
use crate::sim::drift::{self, DriftResult, DriftScheme, DriftWorld, Feedback};

/// The margins swept, in standard errors of the window: none, then up to Cocktail's.
const MARGINS: [f64; 5] = [0.0, 0.5, 0.75, 1.0, 1.645];

/// Cocktail's rules with some taken away: (what is left, the settings), at margin `z`.
fn variants(z: f64) -> [(&'static str, TrackingConfig); 7] {
    let cocktail = TrackingConfig {
        margin_z: z,
        ..TrackingConfig::cocktail()
    };
    let no_shift = TrackingConfig {
        recent: 0,
        ..cocktail
    };
    let no_profile = TrackingConfig {
        prefer_profile_z: None,
        ..no_shift
    };
    // Nothing else left: no forgetting, and no profile fallback below 30 labels.
    let plain = TrackingConfig {
        margin_z: z,
        ..TrackingConfig::plain()
    };
    [
        ("every rule", cocktail),
        (
            "every rule but the cost tier",
            TrackingConfig {
                cost_tier: 1.0,
                ..cocktail
            },
        ),
        ("no shift check", no_shift),
        ("no shift check, no profile preference", no_profile),
        ("the margin alone (plain re-selection with it)", plain),
        (
            "every rule, paced",
            TrackingConfig {
                pace: true,
                ..cocktail
            },
        ),
        (
            "no shift check, paced",
            TrackingConfig {
                pace: true,
                ..no_shift
            },
        ),
    ]
}

/// Whether the sweep is for `dw`'s schedule: the one whose goals compare with plain
/// re-selection.
pub fn applies(dw: &DriftWorld<'_>) -> bool {
    dw.drift.schedule.name == crate::workload::drift::SENTIMENT_DOMAINS.name
}

/// Every setting the table shows: each margin with each set of rules.
fn settings() -> Vec<(f64, &'static str, TrackingConfig)> {
    MARGINS
        .iter()
        .flat_map(|&z| variants(z).map(|(rules, config)| (z, rules, config)))
        .collect()
}

/// The sweep's runs: per setting (margin, rules), one per label setting of
/// [`drift::FEEDBACK`], in its order. The table and the plot both read them.
#[derive(Debug)]
pub struct Sweep {
    rows: Vec<(f64, &'static str, Vec<DriftResult>)>,
}

impl Sweep {
    /// Runs every setting at every label setting (about a second in all: no progress bar
    /// of its own).
    pub fn run(dw: &DriftWorld<'_>, seed: u64) -> Self {
        let settings = settings();
        let jobs: Vec<(TrackingConfig, Feedback)> = settings
            .iter()
            .flat_map(|&(_, _, config)| drift::FEEDBACK.iter().map(move |&f| (config, f)))
            .collect();
        let mut runs = crate::parallel::map_counted(&jobs, None, |&(config, f)| {
            drift::run_tracking(dw, config, f, seed)
        })
        .into_iter();
        let rows = settings
            .into_iter()
            .map(|(z, rules, _)| {
                let runs = runs.by_ref().take(drift::FEEDBACK.len()).collect();
                (z, rules, runs)
            })
            .collect();
        Self { rows }
    }

    /// The table: for every setting and label setting, the accuracy met and the inference
    /// against plain re-selection's run in `results` at the same label setting, and which
    /// settings get more requests meeting the target at no more inference.
    pub fn section(&self, results: &[DriftResult]) -> String {
        let plain: Vec<Option<&DriftResult>> = drift::FEEDBACK
            .iter()
            .map(|&f| drift_report::find(results, DriftScheme::Plain, f))
            .collect();
        let label = |f: Feedback| format!("{} % after {} s", f.fraction * 100.0, f.delay_s);
        let mut s = format!(
            "#### What Cocktail (tracking)'s rules cost against plain re-selection\n\n\
             Cocktail's tracking replayed with its margin swept and its other rules taken away, at every \
             label setting (`benches/src/drift_rules.rs`). Each cell: accuracy met, its points over plain re-selection, and its inference per \
             request against plain re-selection's (shadow calls apart; they are the same for both), and its \
             longest adaptation lag in intervals (plain re-selection's are in the tables above). The row \
             at margin {} with every rule is Cocktail (tracking) above, and with every rule, paced, \
             Cocktail (tracking, paced). The sweep explains the goal. It changed one of Cocktail's \
             settings: the cost tier (choices within {}x of the cheapest that meets the target count \
             as equally cheap, and the most accurate of them serves) was added after it showed the \
             cheapest choice meeting the target on the window to be often a lucky cheap one; the rows \
             without it are the sweep as it stood (the margin 0.75 was added to it after pacing was \
             first swept, where pacing crossed plain re-selection's inference before ties in cost \
             went to the more accurate choice).\n\n| margin (standard errors) | rules | {} |\n|---:|---|{}\n| - | plain re-selection | {} |\n",
            TrackingConfig::cocktail().margin_z,
            TrackingConfig::cocktail().cost_tier,
            drift::FEEDBACK.map(label).join(" | "),
            "---:|".repeat(drift::FEEDBACK.len()),
            plain
                .iter()
                .map(|p| p.map_or("-".into(), |p| format!(
                    "{:.1} % at {:.0} µs",
                    p.accuracy_met * 100.0,
                    p.inference_us
                )))
                .collect::<Vec<_>>()
                .join(" | "),
        );
        // (setting, label setting) pairs that get more at no more inference.
        let mut dominating = Vec::new();
        for (z, rules, runs) in &self.rows {
            let cells: Vec<String> = runs
                .iter()
                .zip(&plain)
                .map(|(run, p)| {
                    let Some(p) = p else {
                        return "-".into();
                    };
                    let points = (run.accuracy_met - p.accuracy_met) * 100.0;
                    let ratio = run.inference_us / p.inference_us.max(f64::MIN_POSITIVE);
                    // Rounded as shown, so a cell that reads +0.0 is not counted as more.
                    let more = (points * 10.0).round() > 0.0 && ratio <= 1.0;
                    if more {
                        dominating.push(format!("margin {z}, {rules}, {}", label(run.feedback)));
                    }
                    let lag = drift_report::lags(DriftScheme::Cocktail, run)
                        .map_or("-".into(), |(_, max)| format!("{max:.0}"));
                    format!(
                        "{}{:.1} % ({points:+.1}) {ratio:.2}x{}, lag {lag}",
                        if more { "**" } else { "" },
                        run.accuracy_met * 100.0,
                        if more { "**" } else { "" },
                    )
                })
                .collect();
            let _ = writeln!(s, "| {z} | {rules} | {} |", cells.join(" | "));
        }
        let _ = writeln!(
            s,
            "\n{}\n",
            if dominating.is_empty() {
                "No setting gets more requests meeting the target than plain re-selection at no more \
                 inference, at any label setting."
                    .to_owned()
            } else {
                format!(
                    "Settings that get more requests meeting the target than plain re-selection at no \
                     more inference (in bold): {}.",
                    dominating.join("; ")
                )
            }
        );
        s
    }

    /// The plot of the sweep with every label, at once (the lag goal's setting): accuracy
    /// met against inference, one line per set of rules over the margins, plain
    /// re-selection's inference marked.
    pub fn plot(
        &self,
        path: &std::path::Path,
        dw: &DriftWorld<'_>,
        results: &[DriftResult],
    ) -> anyhow::Result<()> {
        let full = drift::FEEDBACK[0];
        let plain = drift_report::find(results, DriftScheme::Plain, full)
            .map(|p| p.inference_us)
            .context("no run of plain re-selection with every label to compare with")?;
        let series: Vec<(String, Vec<(f64, f64)>)> = variants(0.0)
            .iter()
            .map(|&(rules, _)| {
                let points = self
                    .rows
                    .iter()
                    .filter(|row| row.1 == rules)
                    .filter_map(|row| row.2.first())
                    .map(|run| (run.inference_us / plain, run.accuracy_met * 100.0))
                    .collect();
                (rules.to_owned(), points)
            })
            .collect();
        crate::plots::lines(
            path,
            &format!(
                "{}, {} % of labels after {} s: margins {} to {} (vertical: plain re-selection)",
                dw.drift.schedule.name,
                full.fraction * 100.0,
                full.delay_s,
                MARGINS[0],
                MARGINS[MARGINS.len() - 1]
            ),
            "inference per request against plain re-selection's",
            "accuracy met (%)",
            &series,
            Some(1.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use cocktail_common::Zoo;

    use super::*;
    use crate::sim::World;
    use crate::workload::drift::SENTIMENT_DOMAINS;

    /// The sweep's ends are the schemes the page compares: every rule at Cocktail's
    /// margin is Cocktail (tracking), and the margin alone at 0 is plain re-selection.
    #[test]
    fn the_sweep_runs_cocktail_and_plain_re_selection_at_its_ends() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "sentiment").unwrap();
        let dw = DriftWorld::new(&zoo, &world, &SENTIMENT_DOMAINS).unwrap();
        let settings = settings();
        let setting = |z: f64, rules: &str| {
            settings
                .iter()
                .find(|s| s.0 == z && s.1.starts_with(rules))
                .map(|s| s.2)
                .unwrap()
        };
        let figures = |r: &DriftResult| (r.accuracy_met, r.inference_us, r.lags.clone());
        for f in [drift::FEEDBACK[0], drift::FEEDBACK[3]] {
            let cocktail = setting(TrackingConfig::cocktail().margin_z, "every rule");
            assert_eq!(
                figures(&drift::run_tracking(&dw, cocktail, f, 3)),
                figures(&drift::run(&dw, DriftScheme::Cocktail, f, 3))
            );
            let plain = setting(0.0, "the margin alone");
            assert_eq!(
                figures(&drift::run_tracking(&dw, plain, f, 3)),
                figures(&drift::run(&dw, DriftScheme::Plain, f, 3))
            );
        }
        // And the settings between them differ from both.
        let between =
            drift::run_tracking(&dw, setting(0.5, "no shift check"), drift::FEEDBACK[0], 3);
        let cocktail = drift::run(&dw, DriftScheme::Cocktail, drift::FEEDBACK[0], 3);
        assert_ne!(figures(&between), figures(&cocktail));
    }

    /// The table names every setting, against plain re-selection at every label setting.
    #[test]
    fn the_table_has_a_row_per_setting_and_a_column_per_label_setting() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "sentiment").unwrap();
        let dw = DriftWorld::new(&zoo, &world, &SENTIMENT_DOMAINS).unwrap();
        let results: Vec<DriftResult> = drift::FEEDBACK
            .iter()
            .map(|&f| drift::run(&dw, DriftScheme::Plain, f, 3))
            .collect();
        let table = Sweep::run(&dw, 3).section(&results);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
        // The header, plain re-selection, and each setting.
        assert_eq!(rows.len(), 2 + settings().len(), "{table}");
        for row in &rows {
            assert_eq!(
                row.matches(" | ").count(),
                1 + drift::FEEDBACK.len(),
                "{row}"
            );
            assert!(
                !row.contains("| - |") || row.starts_with("| - | plain"),
                "{row}"
            );
        }
    }
}
