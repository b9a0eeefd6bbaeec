//! Damage the readers pass over without a word, found from what they leave behind: a gap in
//! a FLAC stream's frame numbers where its reader skipped a frame that failed its checksum,
//! and an MP3 whose last frame is cut short (its reader ends the stream there quietly, as MPEG
//! streams have no stated end). OGG pages are checked as they are read ([`crate::ogg`]).

use symphonia_core::formats::Track;
use symphonia_core::packet::Packet;

/// Follows a FLAC track's packet timestamps, which its reader takes from each frame's header,
/// and counts the audio missing between them. (Other readers number their packets
/// themselves: an MP3's by counting, an OGG page's from the page before, so a lost page or
/// frame leaves no gap in them.)
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    /// The timestamp the next packet should have, in source frames; `None` before the first
    /// packet.
    next: Option<i64>,
    /// Whether the timestamps are FLAC frame positions in source frames (the time base is
    /// 1 / sample rate).
    in_frames: bool,
    /// Gaps found, the frames they miss, and the decoded position of the first.
    pub(crate) count: u32,
    pub(crate) frames: u64,
    pub(crate) first_at: Option<String>,
}

impl Gaps {
    /// A tracker for `track` of a `container` file, a track at `rate` Hz.
    pub(crate) fn new(container: &str, track: &Track, rate: Option<u32>) -> Gaps {
        let in_frames = match (container, track.time_base, rate) {
            ("flac", Some(base), Some(rate)) => base.numer.get() == 1 && base.denom.get() == rate,
            _ => false,
        };
        Gaps { in_frames, ..Gaps::default() }
    }

    /// The frames missing before `packet` (0 where it follows the one before), counted as a
    /// gap decoded at `position`.
    pub(crate) fn before(&mut self, packet: &Packet, position: impl FnOnce() -> String) -> u64 {
        if !self.in_frames {
            return 0;
        }
        let pts = packet.pts.get();
        let missing = match self.next {
            Some(next) if pts > next => (pts - next) as u64,
            _ => 0,
        };
        self.next = pts.checked_add_unsigned(packet.dur.get());
        if missing > 0 {
            self.count += 1;
            self.frames += missing;
            self.first_at.get_or_insert_with(position);
        }
        missing
    }

    /// A new logical stream (a chained OGG) starts its own timestamps, followed by `fresh`; the
    /// gaps found so far are kept.
    pub(crate) fn restart(&mut self, fresh: Gaps) {
        let (count, frames, first_at) = (self.count, self.frames, self.first_at.take());
        *self = Gaps { count, frames, first_at, ..fresh };
    }

    /// The warning for the gaps found, with the source's rate.
    pub(crate) fn warning(&self, rate: Option<u32>) -> Option<String> {
        let at = self.first_at.as_ref()?;
        let seconds = self.frames as f64 / f64::from(rate.filter(|&r| r > 0)?);
        let gaps = if self.count == 1 { "a damaged part".to_string() } else { format!("{} damaged parts", self.count) };
        Some(format!(
            "skipped {gaps} of the file ({seconds:.3} s of audio, the first at {at}): the file looks damaged; \
             silence stands in for the missing audio so that later times stay true"
        ))
    }
}

/// Whether an MP3 ends inside a frame: `tail` holds the stream's last bytes and `last` the last
/// frame its reader gave (header included). A cut frame is left behind that one as a frame
/// header of the same stream (MPEG version, layer and sample rate) with too few bytes after it
/// to be read; a whole frame there would have been read, and ID3v1 or APE tags start otherwise.
pub(crate) fn mp3_cut(tail: &[u8], last: &[u8]) -> bool {
    const SAME_STREAM: u32 = 0xFFFE_0C00; // sync, version, layer; sample rate index
    let (Some(at), Some(last_header)) = (rfind(tail, last), header_word(last)) else { return false };
    let rest = &tail[at + last.len()..];
    match header_word(rest) {
        Some(word) => word & SAME_STREAM == last_header & SAME_STREAM && (word >> 12) & 0xF != 0xF,
        None => false,
    }
}

fn header_word(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// The start of the last occurrence of `needle` in `haystack`.
fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    (0..=haystack.len() - needle.len()).rev().find(|&i| haystack[i..].starts_with(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An MPEG-1 layer III frame header at 44.1 kHz, 128 kbit/s: 417 bytes with the header.
    const HEADER: [u8; 4] = [0xFF, 0xFB, 0x90, 0x64];

    fn frame(fill: u8) -> Vec<u8> {
        let mut frame = HEADER.to_vec();
        frame.resize(417, fill);
        frame
    }

    #[test]
    fn a_header_of_the_same_stream_after_the_last_frame_is_a_cut() {
        let (a, b) = (frame(1), frame(2));
        let whole = [a.clone(), b.clone()].concat();
        assert!(!mp3_cut(&whole, &b), "the stream ends with its last frame");
        let cut = [whole.clone(), frame(3)[..100].to_vec()].concat();
        assert!(mp3_cut(&cut, &b));
        // An ID3v1 tag after the last frame is not a cut.
        let tagged = [whole.clone(), b"TAG".to_vec(), vec![b' '; 125]].concat();
        assert!(!mp3_cut(&tagged, &b));
        // A header of another stream (48 kHz) or with the invalid bitrate is junk, not a cut.
        let other = [whole.clone(), vec![0xFF, 0xFB, 0x94, 0x64, 0, 0]].concat();
        assert!(!mp3_cut(&other, &b));
        let invalid = [whole, vec![0xFF, 0xFB, 0xF0, 0x64, 0, 0]].concat();
        assert!(!mp3_cut(&invalid, &b));
        // Fewer than four bytes cannot be told from junk.
        assert!(!mp3_cut(&[a, b.clone(), vec![0xFF, 0xFB]].concat(), &b));
    }
}
