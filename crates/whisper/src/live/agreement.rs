//! LocalAgreement: a word is final once two consecutive looks at the growing buffer agree on
//! it and on every word before it (Macháček et al., "Turning Whisper into Real-Time
//! Transcription System", 2023, with n = 2).

use crate::text::wer::normalized_word;

/// How many words at the start of `previous` and `current` are the same, compared as the word
/// error rate compares them (case and punctuation aside).
pub(crate) fn agreed<'a>(
    previous: impl IntoIterator<Item = &'a str>,
    current: impl IntoIterator<Item = &'a str>,
) -> usize {
    previous.into_iter().zip(current).take_while(|(a, b)| normalized_word(a) == normalized_word(b)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_common_start_of_two_looks() {
        let a = [" The", " morning", " train", " was"];
        assert_eq!(agreed(a, [" the", " morning", " train,", " is", " late"]), 3);
        assert_eq!(agreed(a, [" A", " morning"]), 0);
        assert_eq!(agreed(a, a), 4);
        assert_eq!(agreed([], a), 0);
    }
}
