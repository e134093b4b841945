//! The ensemble-gain table `cocktail zoo evaluate` prints: how much a plain-majority
//! vote of the task's models beats its best single model on the labelled set just
//! evaluated. It is the vote selection estimates (`Recorded::majority`, ties to the most
//! accurate voter), so the table says what Cocktail's ensembles can gain on this zoo
//! before any constraint narrows the choice.

use cocktail_policy::estimate::{Recorded, combinations};

/// Voters searched: the most accurate models (C(9, 2..=5) = 372 subsets).
const SEARCHED: usize = 9;
/// The largest vote searched.
const MAX_SIZE: usize = 5;

/// The markdown table: the best model, then the best vote of each size from 2 to 5,
/// with its gain in points over the best model. `classes[model][item]` are the answers,
/// `labels[item]` the true classes, `accuracy[model]` each model's accuracy on them.
pub fn table(
    names: &[String],
    classes: &[Vec<usize>],
    labels: &[usize],
    accuracy: &[f64],
) -> String {
    // Class ids fit u16 (the recorded-answers format); a task with more classes gets no table.
    let as_u16 = |v: &[usize]| {
        v.iter()
            .map(|&c| u16::try_from(c).ok())
            .collect::<Option<Vec<u16>>>()
    };
    let (Some(labels), Some(answers)) = (
        as_u16(labels),
        classes
            .iter()
            .map(|c| as_u16(c))
            .collect::<Option<Vec<_>>>(),
    ) else {
        return String::from("(no ensemble-gain table: more than 65,536 classes)\n");
    };
    let recorded = Recorded::new(answers.into_iter().map(Some).collect(), labels);
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| accuracy[b].total_cmp(&accuracy[a]).then(a.cmp(&b)));
    order.truncate(SEARCHED);
    let Some(&best) = order.first() else {
        return String::new();
    };
    let mut out = String::from(
        "| models | members | accuracy | gain over the best model (points) |\n|---:|---|---:|---:|\n",
    );
    let row = |members: &[usize], a: f64| {
        let names: Vec<String> = members.iter().map(|&m| format!("`{}`", names[m])).collect();
        format!(
            "| {} | {} | {:.2} % | {:+.2} |\n",
            members.len(),
            names.join(", "),
            a * 100.0,
            (a - accuracy[best]) * 100.0
        )
    };
    out.push_str(&row(&[best], accuracy[best]));
    for size in 2..=MAX_SIZE.min(order.len()) {
        let voted = combinations(&order, size)
            .into_iter()
            .filter_map(|members| Some((recorded.majority(&members, accuracy)?, members)))
            .fold(None::<(f64, Vec<usize>)>, |best, (a, m)| match best {
                Some((b, _)) if b >= a - 1e-12 => best,
                _ => Some((a, m)),
            });
        if let Some((a, members)) = voted {
            out.push_str(&row(&members, a));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn votes_that_fix_each_others_errors_gain() {
        // Three models, each wrong on a different item: every pair ties on its wrong
        // item, and all three vote every item right.
        let labels = vec![0, 1, 2, 0];
        let classes = vec![vec![1, 1, 2, 0], vec![0, 0, 2, 0], vec![0, 1, 0, 0]];
        let accuracy = [0.75, 0.75, 0.75];
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let table = table(&names, &classes, &labels, &accuracy);
        assert!(table.contains("| 1 | `a` | 75.00 % | +0.00 |"), "{table}");
        assert!(
            table.contains("| 3 | `a`, `b`, `c` | 100.00 % | +25.00 |"),
            "{table}"
        );
    }
}
