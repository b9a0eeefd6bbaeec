//! What `/metrics` reports, in Prometheus's text format (written by the `prometheus` crate):
//! requests by route and status, the queue, audio transcribed and the device's busy time, and
//! how long transcription requests took.

use std::sync::Mutex;

use prometheus::{
    Counter, Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// Upper bounds (seconds) of the request duration histogram's buckets.
const DURATION_BUCKETS: [f64; 12] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// Upper bounds of the batch size histogram's buckets (windows per group step).
const BATCH_BUCKETS: [f64; 8] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];

pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and status.
    requests: IntCounterVec,
    queue_depth: IntGauge,
    jobs_in_work: IntGauge,
    queue_capacity: IntGauge,
    device_healthy: IntGauge,
    audio_seconds: Counter,
    busy_seconds: Counter,
    /// Windows that joined the groups encoded together, and the encoder runs that did.
    encoded_together: IntCounter,
    encoder_batches: IntCounter,
    durations: Histogram,
    /// Group steps by the windows they decoded together.
    batches: Histogram,
    /// The busy time of the last jobs, averaged (seconds per job): what a full queue's
    /// `Retry-After` is estimated from.
    job_seconds: Mutex<Option<f64>>,
}

impl Metrics {
    /// Every family, registered; an error names the family the registry refused.
    pub fn new() -> Result<Metrics, String> {
        let registry = Registry::new();
        let opts = Opts::new;
        let requests = IntCounterVec::new(
            opts("susurrus_requests_total", "Requests answered, by route and status."),
            &["route", "status"],
        );
        let durations = Histogram::with_opts(
            HistogramOpts::new(
                "susurrus_request_duration_seconds",
                "Seconds from a transcription request's arrival to its answer.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
        );
        let batches = Histogram::with_opts(
            HistogramOpts::new(
                "susurrus_batch_windows",
                "Windows of concurrent transcriptions each decoder step decoded together.",
            )
            .buckets(BATCH_BUCKETS.to_vec()),
        );
        let gauge = |name: &str, help: &str| IntGauge::new(name, help);
        let metrics = Metrics {
            requests: requests.map_err(refused)?,
            queue_depth: gauge("susurrus_queue_depth", "Transcriptions waiting for the device.").map_err(refused)?,
            jobs_in_work: gauge("susurrus_jobs_in_work", "Transcriptions the device is working on.")
                .map_err(refused)?,
            queue_capacity: gauge("susurrus_queue_capacity", "The most transcriptions that may wait.")
                .map_err(refused)?,
            device_healthy: gauge("susurrus_device_healthy", "1 while the device runs jobs.").map_err(refused)?,
            audio_seconds: Counter::new("susurrus_audio_seconds_total", "Seconds of audio transcribed.")
                .map_err(refused)?,
            busy_seconds: Counter::new("susurrus_device_busy_seconds_total", "Seconds the device spent transcribing.")
                .map_err(refused)?,
            encoded_together: IntCounter::new(
                "susurrus_windows_encoded_together_total",
                "Windows of concurrent transcriptions encoded together with others.",
            )
            .map_err(refused)?,
            encoder_batches: IntCounter::new(
                "susurrus_encoder_batches_total",
                "Encoder runs over several transcriptions' windows at once.",
            )
            .map_err(refused)?,
            durations: durations.map_err(refused)?,
            batches: batches.map_err(refused)?,
            registry,
            job_seconds: Mutex::new(None),
        };
        let collectors: [Box<dyn prometheus::core::Collector>; 11] = [
            Box::new(metrics.requests.clone()),
            Box::new(metrics.queue_depth.clone()),
            Box::new(metrics.jobs_in_work.clone()),
            Box::new(metrics.queue_capacity.clone()),
            Box::new(metrics.device_healthy.clone()),
            Box::new(metrics.audio_seconds.clone()),
            Box::new(metrics.busy_seconds.clone()),
            Box::new(metrics.encoded_together.clone()),
            Box::new(metrics.encoder_batches.clone()),
            Box::new(metrics.durations.clone()),
            Box::new(metrics.batches.clone()),
        ];
        for collector in collectors {
            metrics.registry.register(collector).map_err(refused)?;
        }
        Ok(metrics)
    }

    /// A request to `route` answered with `status`; `seconds` it took, for transcription routes.
    pub fn answered(&self, route: &'static str, status: u16, seconds: Option<f64>) {
        self.requests.with_label_values(&[route, &status.to_string()]).inc();
        if let Some(seconds) = seconds {
            self.durations.observe(seconds);
        }
    }

    /// A job done: `audio` seconds transcribed in `seconds` from its start to its end (jobs in
    /// work at once overlap: this is what a queued job waits for, not the device's time).
    pub fn transcribed(&self, audio: f64, seconds: f64) {
        // Counters refuse negative increments; a clock never runs backwards here.
        self.audio_seconds.inc_by(audio.max(0.0));
        let mut mean = self.job_seconds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *mean = Some(mean.map_or(seconds, |mean| 0.8 * mean + 0.2 * seconds));
    }

    /// The model's thread ran the device for `seconds` (one scheduler step, whatever number of
    /// jobs it served).
    pub fn device_busy(&self, seconds: f64) {
        self.busy_seconds.inc_by(seconds.max(0.0));
    }

    /// A group step decoded `windows` windows together.
    pub fn group_step(&self, windows: usize) {
        self.batches.observe(windows as f64);
    }

    /// `windows` windows joining the groups were encoded together.
    pub fn encoded_together(&self, windows: usize) {
        self.encoded_together.inc_by(windows as u64);
        self.encoder_batches.inc();
    }

    /// Seconds until `waiting` jobs ahead are likely done (at least 1), `concurrency` of them
    /// in work at a time.
    pub fn retry_after(&self, waiting: usize, concurrency: usize) -> u64 {
        let per_job = self.job_seconds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).unwrap_or(1.0);
        (per_job * waiting.div_ceil(concurrency.max(1)) as f64).ceil().max(1.0) as u64
    }

    /// The text `/metrics` answers, with the device as it stands: `queued` jobs waiting of
    /// `capacity`, `working` in work.
    pub fn render(&self, queued: usize, capacity: usize, working: usize, healthy: bool) -> Result<String, String> {
        self.queue_depth.set(queued as i64);
        self.queue_capacity.set(capacity as i64);
        self.jobs_in_work.set(working as i64);
        self.device_healthy.set(i64::from(healthy));
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).map_err(failed)?;
        String::from_utf8(out).map_err(failed)
    }
}

fn refused(e: prometheus::Error) -> String {
    format!("cannot set up the metrics of /metrics: {e}")
}

fn failed(e: impl std::fmt::Display) -> String {
    format!("cannot write the metrics: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_holds_every_family_with_cumulative_buckets() {
        let m = Metrics::new().unwrap();
        m.answered("/v1/audio/transcriptions", 200, Some(0.3));
        m.answered("/v1/audio/transcriptions", 200, Some(4.0));
        m.answered("/v1/audio/transcriptions", 400, Some(0.01));
        m.answered("/health", 200, None);
        m.transcribed(5.0, 0.5);
        m.device_busy(0.25);
        m.device_busy(0.25);
        m.group_step(3);
        m.group_step(1);
        m.encoded_together(3);
        m.encoded_together(2);
        let text = m.render(2, 64, 1, true).unwrap();
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
