//! Time spent per op, summed over runs: what a backend records when asked to profile (the
//! fast CPU backend with a clock per step, CUDA with events, wgpu with timestamp queries) and
//! `susurrus bench --profile` prints.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shared by a backend's executables and the caller reading it (clones share one table).
#[derive(Clone, Debug, Default)]
pub struct Profile(Arc<Mutex<BTreeMap<String, (usize, Duration)>>>);

impl Profile {
    /// Adds one run of `what` (an op and its type) that took `took`.
    pub fn add(&self, what: String, took: Duration) {
        if let Ok(mut map) = self.0.lock() {
            let entry = map.entry(what).or_default();
            entry.0 += 1;
            entry.1 += took;
        }
    }

    /// `(op, runs, total time)`, longest total first.
    pub fn rows(&self) -> Vec<(String, usize, Duration)> {
        let map = self.0.lock().map(|m| m.clone()).unwrap_or_default();
        let mut rows: Vec<_> = map.into_iter().map(|(k, (n, t))| (k, n, t)).collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.2));
        rows
    }

    pub fn clear(&self) {
        if let Ok(mut map) = self.0.lock() {
            map.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sum_runs_longest_first() {
        let p = Profile::default();
        let q = p.clone();
        p.add("a".into(), Duration::from_millis(2));
        q.add("b".into(), Duration::from_millis(5));
        p.add("a".into(), Duration::from_millis(1));
        assert_eq!(
            q.rows(),
            vec![("b".into(), 1, Duration::from_millis(5)), ("a".into(), 2, Duration::from_millis(3))]
        );
        p.clear();
        assert!(q.rows().is_empty());
    }
}
