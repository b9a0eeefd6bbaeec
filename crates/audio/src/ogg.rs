//! OGG pages checked as the reader reads them. symphonia's OGG reader drops a page that fails
//! its checksum and reads on, and numbers the packets after it from the page before, so a
//! damaged page (and the second of audio it held) vanishes without a trace in what it gives.
//! This watcher sees the same bytes, checks each page's checksum and sequence number the way
//! the reader does, and remembers where pages went missing.

use std::collections::HashMap;

use symphonia_core::checksum::Crc32;
use symphonia_core::io::Monitor;

/// The fixed part of a page header: capture pattern, version, flags, granule position,
/// serial, sequence number, checksum, segment count.
const HEADER: usize = 27;

/// Missing pages, found where a stream's page sequence jumps or bytes that are not a page
/// stand between pages.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Lost {
    /// Places where pages are missing.
    pub(crate) places: u32,
    /// The granule position (the stream's sample count) of the last intact page before the
    /// first place.
    pub(crate) first_after: Option<u64>,
}

/// A passive reader of a byte stream's OGG pages.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    /// `None` until the first bytes; `Some(false)` for a stream that is not OGG.
    ogg: Option<bool>,
    /// Bytes received and not yet parsed (at most one page, 65,307 bytes).
    pending: Vec<u8>,
    /// The source position after `pending`: later bytes are taken only from there on, so that
    /// the reader's seeks (to find the stream's length) and re-reads are not taken for pages.
    next: u64,
    /// Per stream serial: the last intact page's sequence number and granule position.
    streams: HashMap<u32, (u32, u64)>,
    /// The granule position of the last intact page of any stream.
    last_granule: u64,
    /// Bytes were skipped since the last intact page.
    skipping: bool,
    /// The last intact page ends its stream (its end-of-stream flag is set).
    at_end_of_stream: bool,
    lost: Lost,
}

impl Pages {
    /// Takes the bytes `bytes` read at source position `at`.
    pub(crate) fn feed(&mut self, at: u64, bytes: &[u8]) {
        if self.ogg == Some(false) || at > self.next || at + bytes.len() as u64 <= self.next {
            return;
        }
        let fresh = &bytes[(self.next - at) as usize..];
        if self.ogg.is_none() {
            // Decided on the first four bytes.
            if self.pending.len() + fresh.len() < 4 {
                self.pending.extend_from_slice(fresh);
                self.next += fresh.len() as u64;
                return;
            }
            let start: Vec<u8> = self.pending.iter().chain(fresh).take(4).copied().collect();
            self.ogg = Some(start == b"OggS");
            if self.ogg == Some(false) {
                self.pending = Vec::new();
                return;
            }
        }
        self.pending.extend_from_slice(fresh);
        self.next += fresh.len() as u64;
        self.parse();
    }

    fn parse(&mut self) {
        let mut at = 0;
        loop {
            let rest = &self.pending[at..];
            if !rest.starts_with(b"OggS") {
                // Bytes that are not a page: find the next capture pattern.
                let found = rest.windows(4).position(|w| w == b"OggS");
                if rest.len() >= 4 || found.is_some() {
                    self.skipping = true;
                }
                match found {
                    Some(skip) => at += skip,
                    None => {
                        at += rest.len().saturating_sub(3);
                        break;
                    }
                }
                continue;
            }
            if rest.len() < HEADER {
                break;
            }
            let segments = usize::from(rest[26]);
            let Some(table) = rest.get(HEADER..HEADER + segments) else { break };
            let length = HEADER + segments + table.iter().map(|&s| usize::from(s)).sum::<usize>();
            let Some(page) = rest.get(..length) else { break };
            if !checksum_matches(page) {
                // Not a page, or a damaged one: resynchronise after its capture pattern.
                self.skipping = true;
                at += 1;
                continue;
            }
            let mut header = [0; HEADER];
            header.copy_from_slice(&page[..HEADER]);
            self.intact(&header);
            at += length;
        }
        self.pending.drain(..at);
    }

    /// Records an intact page, from its header.
    fn intact(&mut self, page: &[u8; HEADER]) {
        let word = |at: usize| u32::from_le_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]]);
        let granule = u64::from(word(6)) | u64::from(word(10)) << 32;
        let (serial, sequence) = (word(14), word(18));
        let first_of_stream = page[5] & 2 != 0;
        let jumped = match self.streams.get(&serial) {
            Some(&(last, _)) => !first_of_stream && sequence != last.wrapping_add(1),
            None => false,
        };
        if jumped || self.skipping {
            self.lost.places += 1;
            self.lost.first_after.get_or_insert(self.last_granule);
        }
        self.skipping = false;
        self.at_end_of_stream = page[5] & 4 != 0;
        self.streams.insert(serial, (sequence, granule));
        // Pages without a finished packet carry granule position -1.
        if granule != u64::MAX {
            self.last_granule = granule;
        }
    }

    /// Whether the bytes so far end where a stream may end: after a stream's last page, or in
    /// damage already counted as lost pages. A stream that ends elsewhere is cut short.
    pub(crate) fn ends_without_a_cut(&self) -> bool {
        self.skipping || (self.at_end_of_stream && self.pending.is_empty())
    }

    /// What went missing, counting bytes skipped at the end of the stream.
    pub(crate) fn lost(&self) -> Lost {
        let mut lost = self.lost.clone();
        if self.skipping {
            lost.places += 1;
            lost.first_after.get_or_insert(self.last_granule);
        }
        lost
    }
}

/// Whether the page's checksum (CRC-32 of the page with its checksum field zeroed) matches.
fn checksum_matches(page: &[u8]) -> bool {
    let stated = u32::from_le_bytes([page[22], page[23], page[24], page[25]]);
    let mut crc = Crc32::new(0);
    crc.process_buf_bytes(&page[..22]);
    crc.process_buf_bytes(&[0; 4]);
    crc.process_buf_bytes(&page[26..]);
    crc.crc() == stated
}
