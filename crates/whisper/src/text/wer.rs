//! Word error rate: how far one transcript is from another, as the golden tests and the
//! live-transcription benchmark measure it.

/// The words a transcript is compared by: split at white space, lower-cased, with everything
/// but letters, digits and apostrophes dropped (`"Hello,"` and `"hello"` are one word).
pub fn normalized_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(normalized_word).filter(|w| !w.is_empty()).collect()
}

/// One word as [`normalized_words`] compares it.
pub fn normalized_word(word: &str) -> String {
    word.chars().filter(|c| c.is_alphanumeric() || *c == '\'').flat_map(char::to_lowercase).collect()
}

/// Word error rate of `hypothesis` against `reference`: the word-level edit distance
/// (substitutions, deletions, insertions) over the reference's word count, on
/// [`normalized_words`]. An empty reference gives 0 for an empty hypothesis, else 1.
pub fn word_error_rate(reference: &str, hypothesis: &str) -> f64 {
    let (r, h) = (normalized_words(reference), normalized_words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, hw) in h.iter().enumerate() {
            let substitution = previous + usize::from(rw != hw);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    if r.is_empty() { if h.is_empty() { 0.0 } else { 1.0 } } else { row[h.len()] as f64 / r.len() as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_error_rate_counts_edits_over_reference_words() {
        assert_eq!(word_error_rate("The cat sat.", "the cat sat"), 0.0);
        // One substitution and one deletion in four words.
        assert_eq!(word_error_rate("a b c d", "a x c"), 0.5);
        // One insertion.
        assert_eq!(word_error_rate("a b", "a b c"), 0.5);
        assert_eq!(word_error_rate("", ""), 0.0);
        assert_eq!(word_error_rate("", "words"), 1.0);
        assert_eq!(word_error_rate("Don't stop!", "dont stop"), 0.5);
    }

    #[test]
    fn punctuation_alone_is_no_word() {
        assert_eq!(normalized_words(" Yes, - it's \"Fine.\""), ["yes", "it's", "fine"]);
    }
}
