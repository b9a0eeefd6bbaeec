//! Argument parsers and choices the subcommands share: each subcommand's clap struct is its
//! own (in its file under `commands/`, `bench/` or `serve/`), and what two of them accept alike
//! is parsed here, so they never import each other.

/// A language code: letters only, lower-cased (`en`, `de`, `yue`).
pub fn parse_language(s: &str) -> std::result::Result<String, String> {
    let code = s.trim().to_ascii_lowercase();
    if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err("a language is a code of letters such as en, de or yue".into());
    }
    Ok(code)
}

/// A number.
pub fn parse_number(s: &str) -> std::result::Result<f32, String> {
    s.trim().parse::<f32>().map_err(|_| "not a number".to_string())
}

/// A finite number.
pub fn parse_finite(s: &str) -> std::result::Result<f32, String> {
    Some(parse_number(s)?).filter(|v| v.is_finite()).ok_or_else(|| "not a finite number".into())
}

/// A finite number >= 0.
pub fn parse_non_negative(s: &str) -> std::result::Result<f32, String> {
    Some(parse_number(s)?).filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| "not a number >= 0".into())
}

/// A finite number > 0.
pub fn parse_positive(s: &str) -> std::result::Result<f32, String> {
    Some(parse_number(s)?).filter(|v| v.is_finite() && *v > 0.0).ok_or_else(|| "not a number > 0".into())
}

/// A time in seconds >= 0.
pub fn parse_time(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err("a time is a number of seconds >= 0".into()),
    }
}

/// A time in seconds > 0.
pub fn parse_positive_time(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
        _ => Err("a time is a number of seconds > 0".into()),
    }
}

/// A probability, from 0 to 1.
pub fn parse_probability(s: &str) -> std::result::Result<f32, String> {
    Some(parse_number(s)?).filter(|v| (0.0..=1.0).contains(v)).ok_or_else(|| "not a probability from 0 to 1".into())
}

/// The `--task` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskChoice {
    /// Text in the spoken language.
    Transcribe,
    /// English text from speech in any language the model knows.
    Translate,
}
