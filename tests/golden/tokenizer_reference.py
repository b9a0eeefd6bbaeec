"""Writes tests/fixtures/tokenizer_reference.json: token ids that Hugging Face `tokenizers`
gives for a list of test strings with the real model's tokenizer.json, encoded exactly as
faster-whisper's Tokenizer.encode does (`encode(text, add_special_tokens=False).ids`; added
tokens such as <|endoftext|> written in the text are still matched as one token).
crates/whisper/src/text/tokenizer.rs must give the same ids.

A second list encodes the same strings with the file's ByteLevel pre-tokenizer switched to
add_prefix_space=True (the Rust test makes the same edit), so that option is checked too.

Run from the repository root:  "$(./scripts/python_venv.sh)" tests/golden/tokenizer_reference.py
"""

import json
import pathlib
import subprocess

import faster_whisper
import tokenizers

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "tests" / "fixtures" / "tokenizer_reference.json"

STRINGS = [
    "",
    "Hello world.",
    " Hello world.",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces",
    "trailing spaces   ",
    "multiple   spaces  between words",
    " ",
    "   ",
    "line one\nline two\n\nline four\n",
    "\n",
    "tab\tseparated\t\tvalues\t",
    " \t mixed \n\t whitespace",
    "it's don't they're we've I'm you'll he'd",
    "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D",
    "rock'n'roll ''s 'st '",
    "123 4567 89012345 3.14159 1,000,000",
    "abc123def 4th 1990s A1B2C3 x2",
    "Hello!!! What?! ... --- (parens) [brackets] {braces} @#$%^&*",
    "\"quoted\" 'single' `back`",
    "café naïve résumé Ærø Øresund Straße über",
    "日本語のテキスト、中文文本。한국어",
    "emoji 😀🎉 👍🏽 family 👨‍👩‍👧",
    "before<|endoftext|>after",
    " <|endoftext|> <|startoftranscript|><|en|><|transcribe|>",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "<|0.00|> timestamps are not added tokens in this file <|notimestamps|>",
    "<|endoftext incomplete <|",
    "Ⅻ ½ x² ①",
    "हिन्दी العَرَبِيَّة ไทย",
    "Ⓐⓑ 🅰",
    "nbsp\u00a0space ideographic\u3000space nel\u0085line",
    "ctrl\x1cchar\x1fend\x00nul\x7f",
    "supercalifragilisticexpialidocious",
]


def model_dir():
    out = subprocess.run(["./scripts/models/fetch_model.sh"], cwd=ROOT, check=True, capture_output=True, text=True)
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def encode_all(tokenizer):
    return [{"text": s, "ids": tokenizer.encode(s, add_special_tokens=False).ids} for s in STRINGS]


def main():
    path = model_dir() / "tokenizer.json"
    config = json.loads(path.read_text())
    assert config["pre_tokenizer"]["type"] == "ByteLevel", config["pre_tokenizer"]
    assert config["pre_tokenizer"]["add_prefix_space"] is False, config["pre_tokenizer"]
    config["pre_tokenizer"]["add_prefix_space"] = True
    reference = {
        "generator": "tests/golden/tokenizer_reference.py",
        "tokenizers": tokenizers.__version__,
        "faster_whisper": faster_whisper.__version__,
        "cases": encode_all(tokenizers.Tokenizer.from_file(str(path))),
        "prefix_space_cases": encode_all(tokenizers.Tokenizer.from_str(json.dumps(config))),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w") as f:
        json.dump(reference, f, ensure_ascii=True, indent=1)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
