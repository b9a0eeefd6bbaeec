//! A segment as users read it in JSON, written once for the three places that show one: the
//! command's `--format json` lines, the package's result objects (`Segment` in
//! `crates/web/src/lib.rs`'s TypeScript types) and the API's `verbose_json` segments.
//!
//! A [`SegmentView`] borrows a [`Segment`] and writes, in this order: `start`, `end`, `text`,
//! `tokens`, `avg_logprob`, `no_speech_prob`, `temperature`, `compression_ratio`, then `words`
//! when the segment has them (each a [`Word`] as its own serde writes it: `start`, `end`,
//! `word`, `probability`). What differs between the three places is the view's two switches:
//! camelCase names for JS (`avgLogprob`, `noSpeechProb`, `compressionRatio`), and no words for
//! the API, which lists them apart from the segments. Numbering the segments and showing their
//! `seek` is the API's own.
//!
//! The segment's own serde (every field, `seek` and absent words included) is the state handed
//! to a new process, not this.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::decode::transcribe::Segment;
use crate::decode::words::Word;

/// How a view names its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// `avg_logprob`: the command's JSON and the API.
    Snake,
    /// `avgLogprob`: the package's objects, as JS names things.
    Camel,
}

/// A [`Segment`] as JSON shows it (see the module's documentation).
#[derive(Clone, Copy, Debug)]
pub struct SegmentView<'a> {
    segment: &'a Segment,
    case: Case,
    words: bool,
}

impl<'a> SegmentView<'a> {
    /// `segment` with snake_case names and, when it has them, its words.
    pub fn new(segment: &'a Segment) -> SegmentView<'a> {
        SegmentView { segment, case: Case::Snake, words: true }
    }

    /// With camelCase names (`avgLogprob`), as JS objects have them.
    pub fn camel_case(self) -> SegmentView<'a> {
        SegmentView { case: Case::Camel, ..self }
    }

    /// Without the words, for an answer that lists them apart from the segments.
    pub fn without_words(self) -> SegmentView<'a> {
        SegmentView { words: false, ..self }
    }
}

impl Serialize for SegmentView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = self.segment;
        let words: Option<&Vec<Word>> = s.words.as_ref().filter(|_| self.words);
        let name = |snake: &'static str, camel: &'static str| match self.case {
            Case::Snake => snake,
            Case::Camel => camel,
        };
        let mut out = serializer.serialize_struct("Segment", 8 + usize::from(words.is_some()))?;
        out.serialize_field("start", &s.start)?;
        out.serialize_field("end", &s.end)?;
        out.serialize_field("text", &s.text)?;
        out.serialize_field("tokens", &s.tokens)?;
        out.serialize_field(name("avg_logprob", "avgLogprob"), &s.avg_logprob)?;
        out.serialize_field(name("no_speech_prob", "noSpeechProb"), &s.no_speech_prob)?;
        out.serialize_field("temperature", &s.temperature)?;
        out.serialize_field(name("compression_ratio", "compressionRatio"), &s.compression_ratio)?;
        match words {
            Some(words) => out.serialize_field("words", words)?,
            None => out.skip_field("words")?,
        }
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(words: Option<Vec<Word>>) -> Segment {
        Segment {
            start: 0.0,
            end: 1.5,
            text: " Hi \"you\".".into(),
            tokens: vec![50363, 17250, 345, 50438],
            avg_logprob: -0.25,
            no_speech_prob: 0.125,
            temperature: 0.2,
            compression_ratio: 1.5,
            seek: 3000,
            words,
        }
    }

    fn words() -> Vec<Word> {
        vec![
            Word { start: 0.0, end: 0.4, word: " Hi".into(), probability: 0.75 },
            Word { start: 0.4, end: 1.5, word: " \"you\".".into(), probability: 0.5 },
        ]
    }

    #[test]
    fn a_segment_with_words_shows_its_fields_then_its_words() {
        let json = serde_json::to_string(&SegmentView::new(&segment(Some(words())))).unwrap();
        assert_eq!(
            json,
            r#"{"start":0.0,"end":1.5,"text":" Hi \"you\".","tokens":[50363,17250,345,50438],"avg_logprob":-0.25,"no_speech_prob":0.125,"temperature":0.2,"compression_ratio":1.5,"words":[{"start":0.0,"end":0.4,"word":" Hi","probability":0.75},{"start":0.4,"end":1.5,"word":" \"you\".","probability":0.5}]}"#
        );
    }

    #[test]
    fn camel_case_renames_the_three_long_names() {
        let json = serde_json::to_string(&SegmentView::new(&segment(Some(words()))).camel_case()).unwrap();
        assert_eq!(
            json,
            r#"{"start":0.0,"end":1.5,"text":" Hi \"you\".","tokens":[50363,17250,345,50438],"avgLogprob":-0.25,"noSpeechProb":0.125,"temperature":0.2,"compressionRatio":1.5,"words":[{"start":0.0,"end":0.4,"word":" Hi","probability":0.75},{"start":0.4,"end":1.5,"word":" \"you\".","probability":0.5}]}"#
        );
    }

    #[test]
    fn words_are_left_out_when_absent_or_not_wanted() {
        let without = r#"{"start":0.0,"end":1.5,"text":" Hi \"you\".","tokens":[50363,17250,345,50438],"avg_logprob":-0.25,"no_speech_prob":0.125,"temperature":0.2,"compression_ratio":1.5}"#;
        assert_eq!(serde_json::to_string(&SegmentView::new(&segment(None))).unwrap(), without);
        let with_words = segment(Some(words()));
        assert_eq!(serde_json::to_string(&SegmentView::new(&with_words).without_words()).unwrap(), without);
        // Asked for and none found: an empty list, not left out.
        let none_found = serde_json::to_string(&SegmentView::new(&segment(Some(Vec::new())))).unwrap();
        assert!(none_found.ends_with(r#""compression_ratio":1.5,"words":[]}"#), "{none_found}");
    }
}
