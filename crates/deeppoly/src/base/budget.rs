//! What an analysis may spend: a deadline, and for a search a number of
//! leaves. Every phase takes one [`Budget`] from its caller; none starts
//! a clock of its own.

use crate::base::analyzer::AnalysisError;
use std::time::{Duration, Instant};

/// A deadline (none: no time limit) and a leaf limit (none: no limit).
/// Cheap to copy; a phase hands a part of its own to the phases it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    deadline: Option<Instant>,
    leaves: Option<usize>,
}

impl Budget {
    /// No deadline and no leaf limit.
    pub const UNLIMITED: Budget = Budget { deadline: None, leaves: None };

    /// `timeout` from now (none: no deadline).
    pub fn starting_now(timeout: Option<Duration>) -> Self {
        Self::within(timeout.map(|t| Instant::now() + t))
    }

    /// Until `deadline` (none: no deadline).
    pub fn within(deadline: Option<Instant>) -> Self {
        Self { deadline, leaves: None }
    }

    /// Until `deadline`.
    pub fn until(deadline: Instant) -> Self {
        Self::within(Some(deadline))
    }

    /// The same deadline, with at most `leaves` leaves.
    pub fn with_leaves(self, leaves: usize) -> Self {
        Self { leaves: Some(leaves), ..self }
    }

    /// The same deadline, with no leaf limit.
    pub fn without_leaves(self) -> Self {
        Self { leaves: None, ..self }
    }

    pub fn deadline(self) -> Option<Instant> {
        self.deadline
    }

    pub fn leaves(self) -> Option<usize> {
        self.leaves
    }

    /// Whether the deadline has passed.
    pub fn expired(self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether `analysed` leaves exhaust the leaf limit.
    pub fn out_of_leaves(self, analysed: usize) -> bool {
        self.leaves.is_some_and(|n| analysed >= n)
    }

    /// `Err(Timeout)` once the deadline has passed.
    pub fn check(self) -> Result<(), AnalysisError> {
        if self.expired() { Err(AnalysisError::Timeout) } else { Ok(()) }
    }

    /// Time to the deadline (none: no deadline).
    pub fn time_left(self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// A `share` (in [0, 1]) of the time left, from now.
    pub fn share(self, share: f64) -> Self {
        let now = Instant::now();
        Self { deadline: self.time_left().map(|t| now + t.mul_f64(share)), ..self }
    }

    /// At most `d` from now, and never past the deadline.
    pub fn capped(self, d: Duration) -> Self {
        let cap = Instant::now() + d;
        Self { deadline: Some(self.deadline.map_or(cap, |x| x.min(cap))), ..self }
    }

    /// The deadline moved `margin` earlier (kept where it would go before
    /// the clock's start).
    pub fn ending_before(self, margin: Duration) -> Self {
        Self { deadline: self.deadline.map(|d| d.checked_sub(margin).unwrap_or(d)), ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_caps_stay_within_the_deadline() {
        let b = Budget::starting_now(Some(Duration::from_secs(100)));
        let d = b.deadline().unwrap();
        assert!(b.share(0.25).deadline().unwrap() <= d - Duration::from_secs(70));
        assert_eq!(b.capped(Duration::from_secs(1000)).deadline(), Some(d));
        assert!(Budget::UNLIMITED.capped(Duration::from_secs(1)).deadline().is_some());
        assert_eq!(Budget::UNLIMITED.share(0.5), Budget::UNLIMITED);
        assert!(!b.expired() && b.check().is_ok());
        assert_eq!(Budget::until(Instant::now()).check(), Err(AnalysisError::Timeout));
    }

    #[test]
    fn leaf_limits_are_kept_through_time_shares() {
        let b = Budget::UNLIMITED.with_leaves(8).share(0.5);
        assert_eq!(b.leaves(), Some(8));
        assert!(!b.out_of_leaves(7) && b.out_of_leaves(8));
        assert!(!Budget::UNLIMITED.out_of_leaves(usize::MAX));
    }
}
