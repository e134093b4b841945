//! Kairos (§5): spreading batched queries over a pool that mixes instance
//! types by min-cost bipartite matching (§5.1, Eq. 4–8), the throughput upper bound of a
//! configuration (§5.2, Eq. 9–15), the choice among the best bounds by similarity, and
//! the Kairos+ search that evaluates only what the bounds cannot rule out (Algorithm 1).

use serde::{Deserialize, Serialize};

use crate::mix::{Config, dominated_by};

/// A completion time this close to the target counts as a violation (Kairos §5.1:
/// "we replace T_qos with κT_qos … κ = 0.98").
pub const KAPPA: f64 = 0.98;
/// A pairing that would break the target costs this many targets (Eq. 8: "e.g., 10x").
pub const PENALTY: f64 = 10.0;

/// Min-cost assignment for a `rows × cols` row-major cost matrix: each row gets a
/// distinct column when `rows ≤ cols`, each column a distinct row otherwise (Eq. 6–7).
/// Returns the column of each row, `None` for rows left over.
///
/// Written here rather than taken from a crate: the shortest-augmenting-path form of
/// Jonker-Volgenant (Crouse 2016, the algorithm behind SciPy's `linear_sum_assignment`,
/// which the paper used) handles rectangular `f64` matrices directly, while the crates
/// on crates.io want square or integer weights and allocate per call. `benches/policy`
/// measures it against the targets.
pub fn assign(cost: &[f64], rows: usize, cols: usize) -> Vec<Option<usize>> {
    debug_assert_eq!(cost.len(), rows * cols);
    if rows == 0 || cols == 0 {
        return vec![None; rows];
    }
    if rows <= cols {
        return shortest_augmenting_paths(cost, rows, cols)
            .into_iter()
            .map(Some)
            .collect();
    }
    // More rows than columns: match every column to a row on the transpose.
    let transposed: Vec<f64> = (0..cols * rows)
        .map(|i| cost[(i % rows) * cols + i / rows])
        .collect();
    let row_of_col = shortest_augmenting_paths(&transposed, cols, rows);
    let mut col_of_row = vec![None; rows];
    for (c, r) in row_of_col.into_iter().enumerate() {
        col_of_row[r] = Some(c);
    }
    col_of_row
}

/// The column of each of `rows ≤ cols` rows minimising the total cost of the row-major
/// `cost` matrix.
fn shortest_augmenting_paths(cost: &[f64], rows: usize, cols: usize) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    /// Costs are milliseconds: a nanosecond is "the same".
    const TIE: f64 = 1e-6;
    let mut u = vec![0.0; rows];
    let mut v = vec![0.0; cols];
    let mut col_of_row = vec![NONE; rows];
    let mut row_of_col = vec![NONE; cols];
    let mut shortest = vec![f64::INFINITY; cols];
    let mut path = vec![NONE; cols];
    let mut row_seen = vec![false; rows];
    let mut col_seen = vec![false; cols];
    // The columns not yet scanned and their tentative distances, side by side so the
    // inner loop reads memory in order.
    let mut remaining: Vec<usize> = Vec::with_capacity(cols);
    let mut distance: Vec<f64> = Vec::with_capacity(cols);
    let mut duals: Vec<f64> = Vec::with_capacity(cols);
    let mut from: Vec<usize> = Vec::with_capacity(cols);
    // Jonker-Volgenant's column reduction on square matrices: each column's dual is its
    // cheapest cost, and the column goes to that row when the row is still free. Reduced
    // costs stay ≥ 0 and the pairs made have reduced cost 0, so the augmentation below
    // stays exact. (With spare columns a free column's dual must stay 0, so rectangular
    // matrices start from zero duals.)
    for c in (0..cols).filter(|_| rows == cols) {
        let (best_row, best) = (0..rows)
            .map(|r| (r, cost[r * cols + c]))
            .fold((NONE, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
        v[c] = best;
        if best_row != NONE && col_of_row[best_row] == NONE {
            col_of_row[best_row] = c;
            row_of_col[c] = best_row;
        }
    }
    for start in 0..rows {
        if col_of_row[start] != NONE {
            continue;
        }
        // Dijkstra over reduced costs from `start` to the nearest free column.
        remaining.clear();
        remaining.extend((0..cols).rev());
        distance.clear();
        distance.resize(cols, f64::INFINITY);
        // Each remaining column's dual and predecessor row, in the same order.
        duals.clear();
        duals.extend(remaining.iter().map(|&c| v[c]));
        from.clear();
        from.resize(cols, NONE);
        row_seen.fill(false);
        col_seen.fill(false);
        let mut min_value = 0.0;
        let mut row = start;
        let sink = loop {
            row_seen[row] = true;
            let row_costs = &cost[row * cols..(row + 1) * cols];
            let base = min_value - u[row];
            let mut lowest = f64::INFINITY;
            let mut at = 0;
            let mut at_free = false;
            let columns = remaining.iter().zip(&duals);
            for (k, ((&col, &dual), (d, p))) in columns
                .zip(distance.iter_mut().zip(from.iter_mut()))
                .enumerate()
            {
                let reduced = base + row_costs[col] - dual;
                if reduced < *d {
                    *p = row;
                    *d = reduced;
                }
                // Kairos' matrices are degenerate: an instance's busy time is a constant
                // of its column, which the duals absorb, so every instance of a type
                // ends up at the same distance up to rounding. Distances within `TIE`
                // count as equal, and among equals a free column ends the search at once
                // instead of after every tied one (the total is off by at most
                // `rows × TIE`).
                if *d < lowest - TIE {
                    lowest = *d;
                    at = k;
                    at_free = row_of_col[col] == NONE;
                } else if *d <= lowest + TIE && !at_free && row_of_col[col] == NONE {
                    lowest = *d;
                    at = k;
                    at_free = true;
                }
            }
            min_value = lowest;
            let col = remaining.swap_remove(at);
            shortest[col] = distance.swap_remove(at);
            path[col] = from.swap_remove(at);
            duals.swap_remove(at);
            col_seen[col] = true;
            if row_of_col[col] == NONE {
                break col;
            }
            row = row_of_col[col];
        };
        // Update the dual variables, then flip the path.
        u[start] += min_value;
        for r in 0..rows {
            if row_seen[r] && r != start {
                u[r] += min_value - shortest[col_of_row[r]];
            }
        }
        for c in 0..cols {
            if col_seen[c] {
                v[c] -= min_value - shortest[c];
            }
        }
        let mut col = sink;
        loop {
            let r = path[col];
            row_of_col[col] = r;
            let previous = std::mem::replace(&mut col_of_row[r], col);
            if r == start {
                break;
            }
            col = previous;
        }
    }
    col_of_row
}

/// A query waiting to be placed: its batch size and how long it has waited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waiting {
    pub batch: usize,
    pub waited_ms: f64,
}

/// An instance that may take it: its type (an index into the coefficients) and the time
/// until it can start a new query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Server {
    pub type_index: usize,
    pub busy_ms: f64,
}

/// Heterogeneity coefficients `C_j` (Definition 1): the fastest type's latency for the
/// largest query over each type's.
pub fn coefficients(largest_query_ms: &[f64]) -> Vec<f64> {
    let fastest = largest_query_ms
        .iter()
        .copied()
        .filter(|l| *l > 0.0)
        .fold(f64::INFINITY, f64::min);
    largest_query_ms
        .iter()
        .map(|&l| if l > 0.0 { (fastest / l).min(1.0) } else { 1.0 })
        .collect()
}

/// Kairos' query distribution (Eq. 4–8): the server each query goes to, minimising
/// `Σ C_j L_ij` where `L_ij` is `server j`'s wait plus query `i`'s latency on its type,
/// replaced by `PENALTY × qos_ms` when `L_ij + W_i` would pass `KAPPA × qos_ms`.
pub fn distribute(
    queries: &[Waiting],
    servers: &[Server],
    coefficients: &[f64],
    latency_ms: impl Fn(usize, usize) -> f64,
    qos_ms: f64,
) -> Vec<Option<usize>> {
    let cols = servers.len();
    let mut cost = Vec::with_capacity(queries.len() * cols);
    for q in queries {
        for s in servers {
            let finish = s.busy_ms + latency_ms(s.type_index, q.batch);
            let usage = if finish + q.waited_ms <= KAPPA * qos_ms {
                finish
            } else {
                PENALTY * qos_ms
            };
            cost.push(coefficients.get(s.type_index).copied().unwrap_or(1.0) * usage);
        }
    }
    assign(&cost, queries.len(), cols)
}

/// What the bound needs to know about one type, measured on the recent query mix.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TypeRates {
    /// Share of queries the type serves within the target (`f`, queries up to size `s`).
    pub fraction: f64,
    /// Queries per second one instance serves when it takes only queries up to the
    /// largest `s` among the auxiliary types (`Q_a`).
    pub small_qps: f64,
    /// Queries per second on the whole mix (`Q_b`; meaningful for the base type).
    pub all_qps: f64,
    /// Queries per second on the queries larger than that `s` (`Q_b^{s+}`).
    pub large_qps: f64,
}

/// Measures `TypeRates` for every type from a sample of recent batch sizes and each
/// type's latency. The base type is the one that serves the most queries in time, ties
/// to the fastest on the largest query; it comes back first in the order of `types`.
pub fn type_rates(
    batches: &[usize],
    types: usize,
    latency_ms: impl Fn(usize, usize) -> f64,
    qos_ms: f64,
) -> (usize, Vec<TypeRates>) {
    let limit = KAPPA * qos_ms;
    let fits = |t: usize, b: usize| latency_ms(t, b) <= limit;
    let fraction = |t: usize| {
        batches.iter().filter(|&&b| fits(t, b)).count() as f64 / batches.len().max(1) as f64
    };
    let largest = batches.iter().copied().max().unwrap_or(1);
    let base = (0..types)
        .max_by(|&a, &b| {
            fraction(a)
                .total_cmp(&fraction(b))
                .then(latency_ms(b, largest).total_cmp(&latency_ms(a, largest)))
        })
        .unwrap_or(0);
    // The largest size any auxiliary type serves in time (s' of Eq. 14).
    let s = (0..types)
        .filter(|&t| t != base)
        .filter_map(|t| batches.iter().copied().filter(|&b| fits(t, b)).max())
        .max()
        .unwrap_or(0);
    let qps = |t: usize, keep: &dyn Fn(usize) -> bool| {
        let (sum, n) = batches
            .iter()
            .filter(|&&b| keep(b))
            .fold((0.0, 0usize), |(sum, n), &b| {
                (sum + latency_ms(t, b), n + 1)
            });
        if n == 0 || sum <= 0.0 {
            0.0
        } else {
            1000.0 * n as f64 / sum
        }
    };
    let rates = (0..types)
        .map(|t| TypeRates {
            fraction: fraction(t),
            small_qps: qps(t, &|b| b <= s),
            all_qps: qps(t, &|_| true),
            large_qps: qps(t, &|b| b > s),
        })
        .collect();
    (base, rates)
}

/// The throughput upper bound of a configuration (Eq. 12–15): `config[base]` base
/// instances and the others auxiliary, all auxiliary types sharing the largest `s` and
/// `f` (the optimistic simplification of §5.2).
pub fn upper_bound(config: &[u32], base: usize, rates: &[TypeRates]) -> f64 {
    let u = f64::from(config.get(base).copied().unwrap_or(0));
    let b = rates.get(base).copied().unwrap_or(TypeRates {
        fraction: 0.0,
        small_qps: 0.0,
        all_qps: 0.0,
        large_qps: 0.0,
    });
    let (f, aux_qps) = config
        .iter()
        .zip(rates)
        .enumerate()
        .filter(|(t, _)| *t != base)
        .fold((0.0_f64, 0.0), |(f, qps), (_, (&v, r))| {
            (f.max(r.fraction), qps + f64::from(v) * r.small_qps)
        });
    if aux_qps <= 0.0 || f <= 0.0 {
        return u * b.all_qps;
    }
    if f >= 1.0 {
        // Every query fits the auxiliary types: nothing is left only for the base.
        return aux_qps + u * b.all_qps;
    }
    let offloaded = aux_qps * (1.0 - f) / f; // C, Eq. 14
    let base_large = u * b.large_qps;
    if base_large <= offloaded {
        base_large / (1.0 - f)
    } else {
        aux_qps / f + (base_large - offloaded) / base_large * u * b.all_qps
    }
}

/// Kairos' pick among the highest bounds (§5.2): when the top three agree on the number
/// of base instances, the highest; otherwise, of the top ten, the one with the least sum
/// of squared distances to the others. `ranked` is sorted by bound, highest first.
pub fn choose_by_similarity(ranked: &[(Config, f64)], base: usize) -> Option<&Config> {
    let top3 = &ranked[..ranked.len().min(3)];
    let first = top3.first()?;
    if top3.iter().all(|(c, _)| c.get(base) == first.0.get(base)) {
        return Some(&first.0);
    }
    let top10 = &ranked[..ranked.len().min(10)];
    let spread = |c: &Config| -> f64 {
        top10
            .iter()
            .map(|(o, _)| {
                c.iter()
                    .zip(o)
                    .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
                    .sum::<f64>()
            })
            .sum()
    };
    top10
        .iter()
        .min_by(|a, b| spread(&a.0).total_cmp(&spread(&b.0)))
        .map(|(c, _)| c)
}

/// Every configuration with its bound, highest first (ties keep the order of `configs`).
pub fn rank(configs: &[Config], base: usize, rates: &[TypeRates]) -> Vec<(Config, f64)> {
    let mut ranked: Vec<(Config, f64)> = configs
        .iter()
        .map(|c| (c.clone(), upper_bound(c, base, rates)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
}

/// What Kairos+ found and what it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlusOutcome {
    pub best: Option<Config>,
    pub best_qps: f64,
    /// Evaluated configurations and their measured throughput, in order.
    pub evaluated: Vec<(Config, f64)>,
}

/// Kairos+ (Algorithm 1): evaluate configurations from the highest bound down, dropping
/// those whose bound is below the best throughput measured so far and the
/// sub-configurations of each evaluated one.
pub fn kairos_plus<E>(
    ranked: &[(Config, f64)],
    mut evaluate: impl FnMut(&Config) -> Result<f64, E>,
) -> Result<PlusOutcome, E> {
    let mut live = vec![true; ranked.len()];
    let mut outcome = PlusOutcome {
        best: None,
        best_qps: 0.0,
        evaluated: Vec::new(),
    };
    for i in 0..ranked.len() {
        if !live[i] {
            continue;
        }
        let (config, _) = &ranked[i];
        let qps = evaluate(config)?;
        outcome.evaluated.push((config.clone(), qps));
        live[i] = false;
        if qps > outcome.best_qps {
            outcome.best_qps = qps;
            outcome.best = Some(config.clone());
            for (alive, (_, bound)) in live.iter_mut().zip(ranked) {
                *alive &= *bound >= qps;
            }
        }
        for (alive, (other, _)) in live.iter_mut().zip(ranked) {
            *alive &= !dominated_by(other, config);
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every assignment of `rows ≤ cols`, by brute force.
    fn brute(cost: &[f64], rows: usize, cols: usize) -> f64 {
        fn go(cost: &[f64], r: usize, rows: usize, cols: usize, used: &mut Vec<bool>) -> f64 {
            if r == rows {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for c in 0..cols {
                if !used[c] {
                    used[c] = true;
                    best = best.min(cost[r * cols + c] + go(cost, r + 1, rows, cols, used));
                    used[c] = false;
                }
            }
            best
        }
        go(cost, 0, rows, cols, &mut vec![false; cols])
    }

    fn total(cost: &[f64], cols: usize, assignment: &[Option<usize>]) -> f64 {
        assignment
            .iter()
            .enumerate()
            .filter_map(|(r, c)| c.map(|c| cost[r * cols + c]))
            .sum()
    }

    #[test]
    fn assignment_is_optimal_on_random_matrices() {
        let mut state = 12345_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as f64 / f64::from(1u32 << 31)
        };
        for (rows, cols) in [(3, 3), (4, 6), (6, 4), (5, 5), (1, 4), (4, 1), (6, 7)] {
            for _ in 0..20 {
                let cost: Vec<f64> = (0..rows * cols).map(|_| (next() * 10.0).round()).collect();
                let got = assign(&cost, rows, cols);
                let matched: Vec<usize> = got.iter().flatten().copied().collect();
                assert_eq!(matched.len(), rows.min(cols), "Eq. 7: min(m, n) pairs");
                let mut distinct = matched.clone();
                distinct.sort_unstable();
                distinct.dedup();
                assert_eq!(distinct.len(), matched.len(), "Eq. 6: one to one");
                let expected = if rows <= cols {
                    brute(&cost, rows, cols)
                } else {
                    let transposed: Vec<f64> = (0..cols * rows)
                        .map(|i| cost[(i % rows) * cols + i / rows])
                        .collect();
                    brute(&transposed, cols, rows)
                };
                assert!((total(&cost, cols, &got) - expected).abs() < 1e-9);
            }
        }
    }

    /// Kairos-shaped matrices (instances of a type differ by a column constant, so the
    /// reduced costs tie up to rounding) still match optimally.
    #[test]
    fn assignment_is_optimal_on_degenerate_kairos_matrices() {
        let latency = |t: usize, b: usize| [0.9, 0.13, 0.21][t] + [0.011, 0.07, 0.1][t] * b as f64;
        for seed in 0..30_u64 {
            let n = 4 + (seed % 4) as usize;
            let queries: Vec<Waiting> = (0..n)
                .map(|i| Waiting {
                    batch: 1 + ((seed * 7 + i as u64 * 13) % 60) as usize,
                    waited_ms: ((seed + i as u64) % 3) as f64 * 0.7,
                })
                .collect();
            let servers: Vec<Server> = (0..n)
                .map(|j| Server {
                    type_index: j % 3,
                    busy_ms: ((seed * 3 + j as u64 * 5) % 7) as f64 * 0.37,
                })
                .collect();
            let c = coefficients(&[latency(0, 60), latency(1, 60), latency(2, 60)]);
            let got = distribute(&queries, &servers, &c, latency, 6.0);
            let mut cost = Vec::new();
            for q in &queries {
                for s in &servers {
                    let finish = s.busy_ms + latency(s.type_index, q.batch);
                    let usage = if finish + q.waited_ms <= KAPPA * 6.0 {
                        finish
                    } else {
                        PENALTY * 6.0
                    };
                    cost.push(c[s.type_index] * usage);
                }
            }
            let expected = brute(&cost, n, n);
            assert!(
                (total(&cost, n, &got) - expected).abs() < 1e-6,
                "seed {seed}"
            );
        }
    }

    /// Kairos Fig. 5: the large query waits for the fast instance instead of taking
    /// the slow one, which would break the target, and the small one takes the slow one.
    #[test]
    fn large_queries_go_where_they_meet_the_target() {
        // Type 0 is fast (1 ms per item), type 1 slow (4 ms per item).
        let latency = |t: usize, b: usize| b as f64 * if t == 0 { 1.0 } else { 4.0 };
        let queries = [
            Waiting {
                batch: 8,
                waited_ms: 0.0,
            },
            Waiting {
                batch: 2,
                waited_ms: 0.0,
            },
        ];
        let servers = [
            Server {
                type_index: 1,
                busy_ms: 0.0,
            },
            Server {
                type_index: 0,
                busy_ms: 3.0,
            },
        ];
        let c = coefficients(&[8.0, 32.0]);
        assert_eq!(c, vec![1.0, 0.25]);
        let got = distribute(&queries, &servers, &c, latency, 20.0);
        assert_eq!(got, vec![Some(1), Some(0)]);
    }

    fn rates() -> (usize, Vec<TypeRates>) {
        // Base: 10 ms per query of any size; auxiliary: 5 ms, but only batches ≤ 4 fit.
        let latency = |t: usize, b: usize| if t == 0 { 10.0 } else { 5.0 * b as f64 / 4.0 };
        let batches: Vec<usize> = (0..100).map(|i| if i % 2 == 0 { 2 } else { 16 }).collect();
        type_rates(&batches, 2, latency, 10.5)
    }

    #[test]
    fn the_bound_follows_eq_12_to_15() {
        let (base, r) = rates();
        assert_eq!(base, 0);
        assert_eq!(r[1].fraction, 0.5);
        assert!((r[0].all_qps - 100.0).abs() < 1e-9);
        assert!(
            (r[1].small_qps - 400.0).abs() < 1e-9,
            "2.5 ms per small query"
        );
        // Homogeneous: u × Q_b.
        assert!((upper_bound(&[3, 0], base, &r) - 300.0).abs() < 1e-9);
        // 1 base, 1 auxiliary: the base is the bottleneck (100 ≤ 400 × 1): 100 / 0.5.
        assert!((upper_bound(&[1, 1], base, &r) - 200.0).abs() < 1e-9);
        // 10 base, 1 auxiliary: the auxiliary is: 400 / 0.5 + (1000 - 400) / 1000 × 1000.
        assert!((upper_bound(&[10, 1], base, &r) - 1400.0).abs() < 1e-9);
        assert_eq!(
            upper_bound(&[0, 3], base, &r),
            0.0,
            "nothing serves the large ones"
        );
    }

    #[test]
    fn similarity_and_kairos_plus() {
        let (base, r) = rates();
        let configs: Vec<Config> = (0..=3)
            .flat_map(|a| (0..=3).map(move |b| vec![a, b]))
            .filter(|c| c.iter().any(|&n| n > 0))
            .collect();
        let ranked = rank(&configs, base, &r);
        // u = 3: 300 q/s of large queries bound it at 600 from one auxiliary on; ties
        // keep the cheaper first.
        assert_eq!(ranked[0], (vec![3, 1], 600.0));
        assert_eq!(ranked[2], (vec![3, 3], 600.0));
        assert_eq!(choose_by_similarity(&ranked, base), Some(&vec![3, 1]));
        let mixed = vec![
            (vec![3, 0], 9.0),
            (vec![1, 3], 8.0),
            (vec![2, 2], 7.0),
            (vec![4, 0], 6.0),
        ];
        assert_eq!(
            choose_by_similarity(&mixed, 0),
            Some(&vec![2, 2]),
            "the centre of the top ones"
        );
        // The true throughput: 90 % of the bound. The best is the highest bound, found
        // first; after it only the bounds above 540 remain.
        let plus = kairos_plus(&ranked, |c| Ok::<_, ()>(0.9 * upper_bound(c, base, &r))).unwrap();
        assert_eq!(plus.best, Some(vec![3, 1]));
        assert_eq!(plus.evaluated.len(), 3, "{:?}", plus.evaluated);
    }
}
