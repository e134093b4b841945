//! Deterministic jobs on every core (rayon's pool), with a progress bar: the simulator's
//! comparisons, the drift replays and the mix studies of the results page.

use indicatif::ProgressBar;
use rayon::prelude::*;

/// `f` of every item, run one per core, returned in the items' order; `bar` counts each
/// one done. Each job is deterministic on its own, so the results are the same bytes as
/// a loop's.
pub fn map_counted<T: Sync, R: Send>(
    items: &[T],
    bar: Option<&ProgressBar>,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    items
        .par_iter()
        .map(|item| {
            let result = f(item);
            if let Some(bar) = bar {
                bar.inc(1);
            }
            result
        })
        .collect()
}
