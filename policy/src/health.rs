//! Whether an instance the provider runs still serves (docs/design.md, "Health").
//! The controller joins the provider's list with what the registry heard from
//! each worker; an instance that is dead, hung or never registered is terminated and
//! replaced at once, the analogue of an auto-scaling group's health check. Pure: the
//! controller passes in what it observed and when.

use std::time::Duration;

/// What the registry heard from a registered worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heard {
    /// Time since its last heartbeat (or registration).
    pub silent: Duration,
    /// It refused a connection since its last heartbeat.
    pub down: bool,
    /// Calls in a row it left unanswered.
    pub unanswered: u32,
    /// It is going away on purpose (spot notice, scale-in, SIGTERM).
    pub draining: bool,
}

/// One running instance as the controller sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// The provider says its process (or host) is gone.
    pub exited: bool,
    /// Time since the provider first reported it running.
    pub running_for: Duration,
    /// Its worker as registered now, if it is.
    pub registered: Option<Heard>,
    /// Its worker registered at some point since it started running.
    pub was_registered: bool,
}

/// The limits of a healthy instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthConfig {
    /// The workers' heartbeat period.
    pub heartbeat: Duration,
    /// Heartbeats a worker may miss before it counts as dead.
    pub missed_heartbeats: u32,
    /// Calls in a row a worker may leave unanswered before it counts as hung, once it
    /// has also missed a heartbeat.
    pub unanswered_limit: u32,
    /// Time a running instance has to register its worker.
    pub register_within: Duration,
}

/// Why an instance is unhealthy, `None` when it is healthy (or it is too early to say).
pub fn diagnose(o: &Observed, c: &HealthConfig) -> Option<String> {
    // A heartbeat and a half of silence: one was late, not merely delayed.
    let late = c.heartbeat + c.heartbeat / 2;
    if o.exited {
        return Some("its worker process exited".into());
    }
    match o.registered {
        Some(h) if h.draining => None,
        Some(h) if h.silent > c.heartbeat * c.missed_heartbeats => Some(format!(
            "missed {} heartbeats (silent for {:.1} s)",
            c.missed_heartbeats,
            h.silent.as_secs_f64()
        )),
        Some(h) if h.down && h.silent > late => Some(format!(
            "refuses connections and sent no heartbeat for {:.1} s",
            h.silent.as_secs_f64()
        )),
        Some(h) if h.unanswered >= c.unanswered_limit && h.silent > late => Some(format!(
            "hung: left {} calls in a row unanswered and sent no heartbeat for {:.1} s",
            h.unanswered,
            h.silent.as_secs_f64()
        )),
        Some(_) => None,
        None if o.was_registered => Some(
            "its worker left the registry (missed heartbeats or deregistered) while the \
             instance still runs"
                .into(),
        ),
        None if o.running_for > c.register_within => Some(format!(
            "its worker never registered within {:.0} s",
            c.register_within.as_secs_f64()
        )),
        None => None,
    }
}

/// When a pool may have its next health replacement: the first ones go at once, then
/// the pause doubles (1 s, 2 s, 4 s, ... at most a minute), so a worker that crashes at
/// every start does not turn into a launch storm. `recent` is how many replacements the
/// pool had within the last [`BACKOFF_RESET`].
pub fn replacement_pause(recent: u32) -> Duration {
    const FREE: u32 = 3;
    match recent.checked_sub(FREE) {
        None => Duration::ZERO,
        Some(extra) => Duration::from_secs(1u64 << extra.min(6)).min(Duration::from_secs(60)),
    }
}

/// A pool with no health replacement for this long starts again without a pause.
pub const BACKOFF_RESET: Duration = Duration::from_secs(300);

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: HealthConfig = HealthConfig {
        heartbeat: Duration::from_secs(1),
        missed_heartbeats: 3,
        unanswered_limit: 3,
        register_within: Duration::from_secs(60),
    };

    fn heard(silent_ms: u64, down: bool, unanswered: u32) -> Option<Heard> {
        Some(Heard {
            silent: Duration::from_millis(silent_ms),
            down,
            unanswered,
            draining: false,
        })
    }

    fn observed(registered: Option<Heard>) -> Observed {
        Observed {
            exited: false,
            running_for: Duration::from_secs(10),
            registered,
            was_registered: registered.is_some(),
        }
    }

    #[test]
    fn each_kind_of_failure_is_named_and_healthy_ones_are_left_alone() {
        let cases: &[(&str, Observed, Option<&str>)] = &[
            ("heartbeating", observed(heard(400, false, 0)), None),
            (
                "refused once, heartbeat due",
                observed(heard(1200, true, 0)),
                None,
            ),
            (
                "killed: refuses and silent",
                observed(heard(1600, true, 0)),
                Some("refuses connections"),
            ),
            (
                "stopped: unanswered and silent",
                observed(heard(1600, false, 3)),
                Some("hung"),
            ),
            (
                "slow but heartbeating",
                observed(heard(300, false, 5)),
                None,
            ),
            (
                "silent",
                observed(heard(3100, false, 0)),
                Some("missed 3 heartbeats"),
            ),
            (
                "exited",
                Observed {
                    exited: true,
                    ..observed(heard(100, false, 0))
                },
                Some("process exited"),
            ),
            (
                "dropped from the registry",
                Observed {
                    was_registered: true,
                    ..observed(None)
                },
                Some("left the registry"),
            ),
            ("still booting", observed(None), None),
            (
                "never registered",
                Observed {
                    running_for: Duration::from_secs(61),
                    ..observed(None)
                },
                Some("never registered within 60 s"),
            ),
        ];
        for (what, o, expected) in cases {
            let got = diagnose(o, &CONFIG);
            match expected {
                None => assert_eq!(got, None, "{what}"),
                Some(part) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(part)),
                    "{what}: {got:?} should say `{part}`"
                ),
            }
        }
        let draining = Heard {
            draining: true,
            ..heard(5000, true, 9).unwrap_or_else(|| unreachable!())
        };
        assert_eq!(diagnose(&observed(Some(draining)), &CONFIG), None);
    }

    #[test]
    fn replacements_back_off_after_the_first_few() {
        let pauses: Vec<u64> = (0..12).map(|n| replacement_pause(n).as_secs()).collect();
        assert_eq!(pauses, vec![0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
