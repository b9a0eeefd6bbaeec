//! The alignment graph for word timestamps: the alignment heads' cross-attention rows over the
//! window's frames, and each token's probability.

use super::*;

impl Program {
    /// Whether the program has alignment graphs ([`ProgramSpec::alignment`]).
    pub fn can_align(&self) -> bool {
        !self.aligns.is_empty()
    }

    /// Runs the alignment graph on `tokens` (a whole decoded sequence, from
    /// `<|startoftranscript|>` to end of text) against the encoded window, whose audio fills
    /// `frames` encoder positions.
    pub async fn align(&mut self, tokens: &[u32], frames: usize) -> Result<Alignment> {
        let len = tokens.len();
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::bad_argument(format!("token {bad} is outside the vocabulary of {}", self.vocab)));
        }
        if frames == 0 || frames > self.audio_positions {
            return Err(Error::bad_argument(format!("{frames} audio positions of {}", self.audio_positions)));
        }
        let longest = self.aligns.last().map_or(0, |(s, _)| *s);
        let (size, exe) = self.aligns.iter_mut().find(|(s, _)| *s >= len).ok_or_else(|| {
            Error::bad_argument(format!("a sequence of {len} tokens to align, where the longest is {longest}"))
        })?;
        let size = *size;
        let mut padded = tokens.to_vec();
        padded.resize(size, self.pad_token);
        // Row r's next token, where it is text (others read token 0 and are ignored).
        let tv = self.text_vocab;
        let next: Vec<u32> = (0..size as u32)
            .map(|r| {
                let t = padded.get(r as usize + 1).copied().filter(|&t| t < tv).unwrap_or(0);
                r * tv + t
            })
            .collect();
        let inputs = HashMap::from([
            (TOKENS.to_string(), Tensor::u32([size], padded)?),
            (NEXT_INDEX.to_string(), Tensor::u32([size], next)?),
        ]);
        let scalars = HashMap::from([(OFFSET.to_string(), 0), (FRAMES.to_string(), frames as u32)]);
        let out = exe.run(&inputs, &scalars, &[ALIGNMENT, TOKEN_PROBS]).await?;
        let missing = || Error::backend("the alignment graph returned nothing");
        let all = out.get(ALIGNMENT).map(|t| t.to_f32()).ok_or_else(missing)?;
        let probs = out.get(TOKEN_PROBS).map(|t| t.to_f32()).ok_or_else(missing)?;
        let (heads, audio) = (self.alignment_heads, self.audio_positions);
        if all.len() != heads * size * audio || probs.len() != size {
            return Err(missing());
        }
        let mut weights = Vec::with_capacity(heads * len * frames);
        for h in 0..heads {
            for r in 0..len {
                let row = (h * size + r) * audio;
                weights.extend_from_slice(&all[row..row + frames]);
            }
        }
        Ok(Alignment { weights, heads, frames, next_probs: probs[..len - 1].to_vec() })
    }
}
