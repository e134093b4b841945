//! The zoo as a markdown table, kept between markers in models/README.md.

use std::path::Path;

use anyhow::{Context, bail};
use cocktail_common::Zoo;

const START: &str = "<!-- zoo-table:start -->";
const END: &str = "<!-- zoo-table:end -->";

/// One row per model: size, accuracy, single-item latency at 1 and 2 threads, and Pf.
pub fn markdown(zoo: &Zoo) -> String {
    let mut out = String::from(
        "| task | model | architecture | params | accuracy | latency b=1, 1 thread (µs) | latency b=1, 2 threads (µs) | Pf (1 / 2 threads) |\n|---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for m in zoo.models() {
        let latency = |threads| {
            m.profile
                .as_ref()
                .and_then(|p| p.latency_us(threads, 1))
                .map_or_else(|| "-".to_owned(), |us| format!("{us:.0}"))
        };
        let pf = |threads| {
            m.profile
                .as_ref()
                .and_then(|p| p.packing_factor(threads))
                .map_or_else(|| "-".to_owned(), |pf| pf.to_string())
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {:.4} | {} | {} | {} / {} |\n",
            m.task,
            m.name,
            m.arch,
            m.params,
            m.accuracy,
            latency(1),
            latency(2),
            pf(1),
            pf(2)
        ));
    }
    out
}

/// Replaces the text between the table markers of `readme` with the zoo's table.
pub fn rewrite_readme(readme: &Path, zoo: &Zoo) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(readme).with_context(|| format!("reading {}", readme.display()))?;
    let (Some(start), Some(end)) = (text.find(START), text.find(END)) else {
        bail!("{} has no `{START}` … `{END}` markers", readme.display());
    };
    let updated = format!(
        "{}{START}\n{}{}",
        &text[..start],
        markdown(zoo),
        &text[end..]
    );
    std::fs::write(readme, updated).with_context(|| format!("writing {}", readme.display()))
}
