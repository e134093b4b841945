//! The results page's goals (issue 14, point 6), checked on every scheme comparison: in
//! each, Cocktail meets the target accuracy for more requests than InFaaS (by at least 5
//! points) and than Clipper, costs at least 1.45x less than InFaaS and 1.35x less than
//! Clipper, and uses at most 0.45x Clipper's models per request. Each cell says the
//! figures, and by how much a missed goal is missed.

use std::fmt::Write as _;

use crate::sim::{SimResult, by_scheme};

/// Points of accuracy met by which Cocktail must lead InFaaS.
pub const LEAD_OVER_INFAAS: f64 = 5.0;
/// How many times cheaper than InFaaS, and than Clipper, Cocktail must be.
pub const CHEAPER_THAN_INFAAS: f64 = 1.45;
pub const CHEAPER_THAN_CLIPPER: f64 = 1.35;
/// The most of Clipper's models per request Cocktail may use.
pub const MODELS_OF_CLIPPER: f64 = 0.45;

/// What the goals compare of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Share of requests, 0..1.
    pub accuracy_met: f64,
    pub cost: f64,
    pub models_per_request: f64,
}

impl From<&SimResult> for Figures {
    fn from(r: &SimResult) -> Self {
        Self {
            accuracy_met: r.accuracy_met,
            cost: r.cost,
            models_per_request: r.models_per_request,
        }
    }
}

/// One goal's outcome, as a table cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub met: bool,
    pub text: String,
}

/// The five goals of `it` (Cocktail or Cocktail-M) against InFaaS and Clipper.
pub fn verdicts(it: Figures, infaas: Figures, clipper: Figures) -> [Verdict; 5] {
    let points = |a: f64, b: f64| (a - b) * 100.0;
    let met_pct = |f: Figures| f.accuracy_met * 100.0;
    let lead = points(it.accuracy_met, infaas.accuracy_met);
    let over_clipper = points(it.accuracy_met, clipper.accuracy_met);
    let accuracy = |lead: f64, need: f64, other: Figures| Verdict {
        met: lead >= need,
        text: format!(
            "{:.1} % vs {:.1} %: {}",
            met_pct(it),
            met_pct(other),
            if lead >= need {
                format!("met (+{lead:.1} points)")
            } else {
                format!("missed by {:.1} points", need - lead)
            }
        ),
    };
    // A ratio of costs, or of models, that must reach `need` (at least, or at most).
    let ratio = |value: f64, need: f64, at_least: bool| {
        let met = value.is_finite()
            && if at_least {
                value >= need
            } else {
                value <= need
            };
        Verdict {
            met,
            text: if met {
                format!("{value:.2}x: met")
            } else {
                format!("{value:.2}x: missed by {:.2}x", (value - need).abs())
            },
        }
    };
    [
        accuracy(lead, LEAD_OVER_INFAAS, infaas),
        // "More than Clipper": any lead above zero.
        accuracy(over_clipper, f64::MIN_POSITIVE, clipper),
        ratio(infaas.cost / it.cost, CHEAPER_THAN_INFAAS, true),
        ratio(clipper.cost / it.cost, CHEAPER_THAN_CLIPPER, true),
        ratio(
            it.models_per_request / clipper.models_per_request,
            MODELS_OF_CLIPPER,
            false,
        ),
    ]
}

/// The goals table over `runs` (a name and that comparison's results), for Cocktail and
/// Cocktail-M, with how many goals each meets.
pub fn markdown(runs: &[(&str, &[SimResult])]) -> String {
    let mut s = format!(
        "| run | scheme | accuracy met vs InFaaS (goal: +{LEAD_OVER_INFAAS} points) | \
         accuracy met vs Clipper (goal: more) | InFaaS's cost / its (goal: ≥ {CHEAPER_THAN_INFAAS}x) | \
         Clipper's cost / its (goal: ≥ {CHEAPER_THAN_CLIPPER}x) | its models per request / Clipper's \
         (goal: ≤ {MODELS_OF_CLIPPER}x) |\n|---|---|---|---|---|---|---|\n"
    );
    let mut tally: Vec<(&str, usize, usize)> = Vec::new();
    for (run, results) in runs {
        let (Some(infaas), Some(clipper)) =
            (by_scheme(results, "InFaaS"), by_scheme(results, "Clipper"))
        else {
            continue;
        };
        for scheme in ["Cocktail", "Cocktail-M"] {
            let Some(it) = by_scheme(results, scheme) else {
                continue;
            };
            let verdicts = verdicts(it.into(), infaas.into(), clipper.into());
            let cells: Vec<&str> = verdicts.iter().map(|v| v.text.as_str()).collect();
            let _ = writeln!(s, "| {run} | {scheme} | {} |", cells.join(" | "));
            let met = verdicts.iter().filter(|v| v.met).count();
            match tally.iter_mut().find(|t| t.0 == scheme) {
                Some(t) => {
                    t.1 += met;
                    t.2 += verdicts.len();
                }
                None => tally.push((scheme, met, verdicts.len())),
            }
        }
    }
    let counts: Vec<String> = tally
        .iter()
        .map(|(scheme, met, all)| format!("{scheme} meets {met} of {all} goals"))
        .collect();
    let _ = writeln!(s, "\n{}.", counts.join("; "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(accuracy_met: f64, cost: f64, models_per_request: f64) -> Figures {
        Figures {
            accuracy_met,
            cost,
            models_per_request,
        }
    }

    #[test]
    fn each_goal_says_whether_it_is_met_and_by_how_much_it_is_missed() {
        let infaas = figures(0.644, 0.745, 1.0);
        let clipper = figures(0.248, 0.705, 10.47);
        // Today's wiki Strict run: the lead over InFaaS is 2.4 points of the 5 needed.
        let cocktail = figures(0.668, 0.2235, 1.0);
        let v = verdicts(cocktail, infaas, clipper);
        assert_eq!(v[0].text, "66.8 % vs 64.4 %: missed by 2.6 points");
        assert!(!v[0].met);
        assert_eq!(v[1].text, "66.8 % vs 24.8 %: met (+42.0 points)");
        assert!(v[1].met);
        assert_eq!(v[2].text, "3.33x: met");
        assert_eq!(v[3].text, "3.15x: met");
        assert_eq!(v[4].text, "0.10x: met");
        assert!(v[2..].iter().all(|v| v.met));
        // A run that meets the accuracy goal, costs too much and uses too many models.
        let dear = figures(0.70, 0.58, 5.0);
        let v = verdicts(dear, infaas, clipper);
        assert_eq!(v[0].text, "70.0 % vs 64.4 %: met (+5.6 points)");
        assert_eq!(v[2].text, "1.28x: missed by 0.17x");
        assert_eq!(v[3].text, "1.22x: missed by 0.13x");
        assert_eq!(v[4].text, "0.48x: missed by 0.03x");
        assert!(v[0].met && !v[2].met && !v[3].met && !v[4].met);
        // Level with Clipper is not more than Clipper.
        assert!(!verdicts(clipper, infaas, clipper)[1].met);
    }
}
