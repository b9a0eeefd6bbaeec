//! What `/metrics` reports, in Prometheus's text format: requests by route and status, the
//! queue, audio transcribed and the device's busy time, and how long transcription requests
//! took.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds (seconds) of the request duration histogram's buckets.
const DURATION_BUCKETS: [f64; 12] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Requests answered, by route and status.
    requests: BTreeMap<(&'static str, u16), u64>,
    audio_seconds: f64,
    busy_seconds: f64,
    /// The busy time of the last jobs, averaged (seconds per job): what a full queue's
    /// `Retry-After` is estimated from.
    job_seconds: Option<f64>,
    /// Transcription requests' durations: per bucket, their sum and count.
    durations: [u64; DURATION_BUCKETS.len()],
    duration_sum: f64,
    duration_count: u64,
    /// Group steps by the windows they decoded together: per bucket of [`BATCH_BUCKETS`],
    /// their sum and count.
    batches: [u64; BATCH_BUCKETS.len()],
    batch_sum: u64,
    batch_count: u64,
    /// Windows that joined the groups encoded together, and the encoder runs that did.
    encoded_together: u64,
    encoder_batches: u64,
}

/// Upper bounds of the batch size histogram's buckets (windows per group step).
const BATCH_BUCKETS: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

impl Metrics {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while the lock was held left counters, not broken invariants.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request to `route` answered with `status`; `seconds` it took, for transcription routes.
    pub fn answered(&self, route: &'static str, status: u16, seconds: Option<f64>) {
        let mut inner = self.inner();
        *inner.requests.entry((route, status)).or_default() += 1;
        if let Some(seconds) = seconds {
            for (bucket, bound) in DURATION_BUCKETS.iter().enumerate() {
                if seconds <= *bound {
                    inner.durations[bucket] += 1;
                }
            }
            inner.duration_sum += seconds;
            inner.duration_count += 1;
        }
    }

    /// A job done: `audio` seconds transcribed in `busy` seconds of the device.
    pub fn transcribed(&self, audio: f64, busy: f64) {
        let mut inner = self.inner();
        inner.audio_seconds += audio;
        inner.busy_seconds += busy;
        inner.job_seconds = Some(inner.job_seconds.map_or(busy, |mean| 0.8 * mean + 0.2 * busy));
    }

    /// A group step decoded `windows` windows together.
    pub fn group_step(&self, windows: usize) {
        let mut inner = self.inner();
        for (bucket, bound) in BATCH_BUCKETS.iter().enumerate() {
            if windows <= *bound {
                inner.batches[bucket] += 1;
            }
        }
        inner.batch_sum += windows as u64;
        inner.batch_count += 1;
    }

    /// `windows` windows joining the groups were encoded together.
    pub fn encoded_together(&self, windows: usize) {
        let mut inner = self.inner();
        inner.encoded_together += windows as u64;
        inner.encoder_batches += 1;
    }

    /// Seconds until `waiting` jobs ahead are likely done (at least 1), `concurrency` of them
    /// in work at a time.
    pub fn retry_after(&self, waiting: usize, concurrency: usize) -> u64 {
        let per_job = self.inner().job_seconds.unwrap_or(1.0);
        (per_job * waiting.div_ceil(concurrency.max(1)) as f64).ceil().max(1.0) as u64
    }

    /// The text `/metrics` answers, with the device as it stands: `queued` jobs waiting of
    /// `capacity`, `working` in work.
    pub fn render(&self, queued: usize, capacity: usize, working: usize, healthy: bool) -> String {
        let inner = self.inner();
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        family("susurrus_requests_total", "counter", "Requests answered, by route and status.");
        let mut lines = String::new();
        for ((route, status), count) in &inner.requests {
            let _ = writeln!(lines, "susurrus_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}");
        }
        out += &lines;
        let mut gauge = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        gauge("susurrus_queue_depth", "gauge", "Transcriptions waiting for the device.", queued.to_string());
        gauge("susurrus_jobs_in_work", "gauge", "Transcriptions the device is working on.", working.to_string());
        gauge("susurrus_queue_capacity", "gauge", "The most transcriptions that may wait.", capacity.to_string());
        gauge("susurrus_device_healthy", "gauge", "1 while the device runs jobs.", u8::from(healthy).to_string());
        gauge(
            "susurrus_audio_seconds_total",
            "counter",
            "Seconds of audio transcribed.",
            inner.audio_seconds.to_string(),
        );
        gauge(
            "susurrus_device_busy_seconds_total",
            "counter",
            "Seconds the device spent transcribing.",
            inner.busy_seconds.to_string(),
        );
        gauge(
            "susurrus_windows_encoded_together_total",
            "counter",
            "Windows of concurrent transcriptions encoded together with others.",
            inner.encoded_together.to_string(),
        );
        gauge(
            "susurrus_encoder_batches_total",
            "counter",
            "Encoder runs over several transcriptions' windows at once.",
            inner.encoder_batches.to_string(),
        );
        let name = "susurrus_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Seconds from a transcription request's arrival to its answer.\n# TYPE {name} histogram"
        );
        for (bound, count) in DURATION_BUCKETS.iter().zip(inner.durations) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", inner.duration_count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", inner.duration_sum, inner.duration_count);
        let name = "susurrus_batch_windows";
        let _ = writeln!(
            out,
            "# HELP {name} Windows of concurrent transcriptions each decoder step decoded together.\n# TYPE {name} histogram"
        );
        for (bound, count) in BATCH_BUCKETS.iter().zip(inner.batches) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", inner.batch_count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", inner.batch_sum, inner.batch_count);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_holds_every_family_with_cumulative_buckets() {
        let m = Metrics::default();
        m.answered("/v1/audio/transcriptions", 200, Some(0.3));
        m.answered("/v1/audio/transcriptions", 200, Some(4.0));
        m.answered("/v1/audio/transcriptions", 400, Some(0.01));
        m.answered("/health", 200, None);
        m.transcribed(5.0, 0.5);
        m.group_step(3);
        m.group_step(1);
        m.encoded_together(3);
        m.encoded_together(2);
        let text = m.render(2, 64, 1, true);
        for line in [
            "susurrus_requests_total{route=\"/health\",status=\"200\"} 1",
            "susurrus_requests_total{route=\"/v1/audio/transcriptions\",status=\"200\"} 2",
            "susurrus_requests_total{route=\"/v1/audio/transcriptions\",status=\"400\"} 1",
            "susurrus_queue_depth 2",
            "susurrus_queue_capacity 64",
            "susurrus_jobs_in_work 1",
            "susurrus_device_healthy 1",
            "susurrus_audio_seconds_total 5",
            "susurrus_device_busy_seconds_total 0.5",
            "susurrus_request_duration_seconds_bucket{le=\"0.1\"} 1",
            "susurrus_request_duration_seconds_bucket{le=\"0.5\"} 2",
            "susurrus_request_duration_seconds_bucket{le=\"5\"} 3",
            "susurrus_request_duration_seconds_bucket{le=\"+Inf\"} 3",
            "susurrus_request_duration_seconds_count 3",
            "# TYPE susurrus_request_duration_seconds histogram",
            "susurrus_batch_windows_bucket{le=\"1\"} 1",
            "susurrus_batch_windows_bucket{le=\"2\"} 1",
            "susurrus_batch_windows_bucket{le=\"4\"} 2",
            "susurrus_batch_windows_bucket{le=\"+Inf\"} 2",
            "susurrus_batch_windows_sum 4",
            "susurrus_windows_encoded_together_total 5",
            "susurrus_encoder_batches_total 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
        assert_eq!(m.retry_after(3, 1), 2); // 0.5 s a job
        assert_eq!(m.retry_after(9, 3), 2); // 3 at a time
    }
}
