//! MP4's edit lists, read beside symphonia's MP4 reader. An AAC encoder starts every stream
//! with a delay (1,024 frames from FFmpeg's, 2,112 from Apple's) and pads its end to a whole
//! packet; the file's edit list (`moov/trak/edts/elst`) says which frames are presented, and
//! FFmpeg and every player cut the rest. symphonia's reader parses the list but does not apply
//! it, so the audio would start 23 to 48 ms late: this watcher sees the bytes the reader reads,
//! keeps the `moov` box, and reads each track's first edit from it.

/// Boxes larger than this are not kept: an hour of AAC has about 2 MB of index.
const MAX_MOOV: u64 = 32 << 20;

/// A track's presented frames: `skip` frames of the decoded stream (in the media's time
/// scale) are dropped, then `keep` frames (in the movie's time scale, `None` for all) are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Edit {
    pub(crate) skip: u64,
    pub(crate) media_scale: u32,
    pub(crate) keep: Option<u64>,
    pub(crate) movie_scale: u32,
}

impl Edit {
    /// The edit in frames at `rate`: the frames to drop, the frames to keep after them.
    pub(crate) fn frames(&self, rate: u32) -> (u64, Option<u64>) {
        let at = |t: u64, scale: u32| (u128::from(t) * u128::from(rate) / u128::from(scale.max(1))) as u64;
        (at(self.skip, self.media_scale), self.keep.map(|keep| at(keep, self.movie_scale)))
    }
}

/// A passive reader of a byte stream's top-level MP4 boxes.
#[derive(Debug, Default)]
pub(crate) struct Boxes {
    /// The stream starts with an MP4 box.
    mp4: bool,
    /// Not an MP4 (decided on the first box), or the index is too large to keep.
    off: bool,
    /// The source position of the next top-level box's header, and its bytes so far.
    next: u64,
    header: Vec<u8>,
    /// The `moov` box: where it starts, its length and its bytes so far.
    moov: Option<(u64, u64, Vec<u8>)>,
}

impl Boxes {
    /// Takes the bytes `bytes` read at source position `at`.
    pub(crate) fn feed(&mut self, at: u64, bytes: &[u8]) {
        let end = at + bytes.len() as u64;
        if let Some((start, len, moov)) = &mut self.moov {
            let have = *start + moov.len() as u64;
            if moov.len() as u64 == *len || at > have || end <= have {
                return;
            }
            let from = (have - at) as usize;
            let take = (*len - moov.len() as u64).min(end - have) as usize;
            moov.extend_from_slice(&bytes[from..from + take]);
            return;
        }
        while !self.off && self.moov.is_none() {
            // The header's bytes so far end at `next + header.len()`; reads elsewhere (the
            // reader's seeks over media data) are not headers.
            let want = self.next + self.header.len() as u64;
            if at > want || end <= want {
                return;
            }
            let from = (want - at) as usize;
            let take = (16 - self.header.len()).min(bytes.len() - from);
            self.header.extend_from_slice(&bytes[from..from + take]);
            let Some((size, header_len, kind)) = box_header(&self.header) else {
                if self.header.len() < 16 {
                    return;
                }
                self.off = true;
                return;
            };
            if self.next == 0 {
                self.mp4 = matches!(&kind, b"ftyp" | b"moov" | b"mdat" | b"free" | b"skip" | b"wide" | b"uuid");
                if !self.mp4 {
                    self.off = true;
                    return;
                }
            }
            if &kind == b"moov" {
                if size > MAX_MOOV || size < header_len {
                    self.off = true;
                    return;
                }
                // The header's bytes (up to 16) are the box's first; the rest follow in this
                // read or later ones.
                let mut moov = Vec::with_capacity(size as usize);
                moov.extend_from_slice(&self.header[..self.header.len().min(size as usize)]);
                self.header.clear();
                self.moov = Some((self.next, size, moov));
                self.feed(at, bytes);
                return;
            }
            // size 0: the box runs to the end of the file.
            if size == 0 {
                self.off = true;
                return;
            }
            self.next += size;
            self.header.clear();
        }
    }

    /// Whether the stream is an MP4 whose index (`moov`) came before any media data.
    pub(crate) fn index_first(&self) -> bool {
        self.mp4 && self.moov.is_some()
    }

    /// Whether the stream is an MP4 whose index (`moov`) was not reached: it follows the media
    /// data in a stream that cannot seek, or the file ends before it.
    pub(crate) fn index_missing(&self) -> bool {
        self.mp4 && self.moov.is_none()
    }

    /// The first edit of track `track` (its `tkhd` id), where the file has an edit list.
    pub(crate) fn edit(&self, track: u32) -> Option<Edit> {
        let (_, len, moov) = self.moov.as_ref()?;
        if moov.len() as u64 != *len {
            return None;
        }
        let (_, header_len, _) = box_header(moov)?;
        let body = &moov[header_len as usize..];
        let movie_scale = child(body, b"mvhd").and_then(timescale)?;
        children(body).filter(|(kind, _)| kind == b"trak").find_map(|(_, trak)| {
            let tkhd = child(trak, b"tkhd")?;
            let id_at = if *tkhd.first()? == 1 { 20 } else { 12 };
            if u32::from_be_bytes(tkhd.get(id_at..id_at + 4)?.try_into().ok()?) != track {
                return None;
            }
            let media_scale = child(trak, b"mdia").and_then(|mdia| child(mdia, b"mdhd")).and_then(timescale)?;
            let elst = child(trak, b"edts").and_then(|edts| child(edts, b"elst"))?;
            let (skip, keep) = first_edit(elst)?;
            Some(Edit { skip, media_scale, keep, movie_scale })
        })
    }
}

/// A box header at the start of `bytes`: its total size, the header's length, its type.
fn box_header(bytes: &[u8]) -> Option<(u64, u64, [u8; 4])> {
    let size = u32::from_be_bytes(bytes.get(0..4)?.try_into().ok()?);
    let kind: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
    if size == 1 {
        let large = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
        return Some((large, 16, kind));
    }
    Some((u64::from(size), 8, kind))
}

/// The boxes inside a container box's body, as (type, body).
fn children(mut body: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        let (size, header_len, kind) = box_header(body)?;
        if size < header_len || size > body.len() as u64 {
            return None;
        }
        let (this, rest) = body.split_at(size as usize);
        body = rest;
        Some((kind, &this[header_len as usize..]))
    })
}

fn child<'a>(body: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    children(body).find(|(k, _)| k == kind).map(|(_, b)| b)
}

/// The time scale of an `mvhd` or `mdhd` body (version 0: 32-bit times, 1: 64-bit).
fn timescale(body: &[u8]) -> Option<u32> {
    let at = if *body.first()? == 1 { 20 } else { 12 };
    Some(u32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?))
}

/// The first presenting edit of an `elst` body: (media time, segment duration). An empty
/// edit (media time -1, a pause before the track starts) is passed over; a duration of 0
/// means the whole rest.
fn first_edit(body: &[u8]) -> Option<(u64, Option<u64>)> {
    let version = *body.first()?;
    let count = u32::from_be_bytes(body.get(4..8)?.try_into().ok()?) as usize;
    let entry_len = if version == 1 { 20 } else { 12 };
    (0..count).find_map(|i| {
        let entry = body.get(8 + i * entry_len..8 + (i + 1) * entry_len)?;
        let (duration, media_time) = if version == 1 {
            (u64::from_be_bytes(entry[0..8].try_into().ok()?), i64::from_be_bytes(entry[8..16].try_into().ok()?))
        } else {
            (
                u64::from(u32::from_be_bytes(entry[0..4].try_into().ok()?)),
                i64::from(i32::from_be_bytes(entry[4..8].try_into().ok()?)),
            )
        };
        (media_time >= 0).then_some((media_time as u64, (duration > 0).then_some(duration)))
    })
}
