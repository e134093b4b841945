//! Majority-vote accuracy of an ensemble from its members' accuracies (Cocktail
//! Appendix A). The paper's binomial form assumes one accuracy `a` for every member:
//! `P = Σ_{i=⌊N/2⌋+1..N} C(N,i) aⁱ(1−a)^(N−i)`. With members of different accuracy the
//! number of correct votes is Poisson-binomial; its exact distribution is a small dynamic
//! programme over the members, O(N²), which is what selection uses.

/// Probability that more than half of the members are correct, treating members as
/// independent with the given accuracies (each clamped to [0, 1]).
pub fn majority_accuracy(accuracies: &[f64]) -> f64 {
    let n = accuracies.len();
    if n == 0 {
        return 0.0;
    }
    // dist[k] = probability that exactly k of the members seen so far are correct.
    let mut dist = vec![0.0_f64; n + 1];
    dist[0] = 1.0;
    for (seen, &a) in accuracies.iter().enumerate() {
        let a = a.clamp(0.0, 1.0);
        for k in (0..=seen + 1).rev() {
            let stay_wrong = dist[k] * (1.0 - a);
            let become_right = if k > 0 { dist[k - 1] * a } else { 0.0 };
            dist[k] = stay_wrong + become_right;
        }
    }
    dist[n / 2 + 1..].iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{Binomial, DiscreteCDF};

    #[test]
    fn equals_binomial_when_accuracies_are_equal() {
        for n in 1..=11_u64 {
            for a in [0.55, 0.7, 0.9] {
                let binomial = Binomial::new(a, n).unwrap();
                let expected = 1.0 - binomial.cdf(n / 2);
                let got = majority_accuracy(&vec![a; n as usize]);
                assert!(
                    (got - expected).abs() < 1e-12,
                    "n={n} a={a}: {got} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn small_cases_by_hand() {
        assert_eq!(majority_accuracy(&[]), 0.0);
        assert!((majority_accuracy(&[0.8]) - 0.8).abs() < 1e-12);
        // Two members: a majority needs both.
        assert!((majority_accuracy(&[0.8, 0.9]) - 0.72).abs() < 1e-12);
        // Three members: at least two right.
        let (a, b, c) = (0.9_f64, 0.8_f64, 0.7_f64);
        let expected = a * b * c + a * b * (1.0 - c) + a * (1.0 - b) * c + (1.0 - a) * b * c;
        assert!((majority_accuracy(&[a, b, c]) - expected).abs() < 1e-12);
    }
}
