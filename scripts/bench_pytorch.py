#!/usr/bin/env python3
"""PyTorch peer figures for `susurrus bench` on a GPU: Whisper tiny.en's shapes (or another
config's) in Hugging Face transformers (random weights: timing does not depend on them), one
30 s encoder window and one decoder step with a KV cache, fp32 and fp16, median of
CUDA-synchronised runs. Run on the GPU machine beside `susurrus bench --backend wgpu`; prints
one table."""
import statistics
import time

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration


def median_ms(fn, runs=50, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(config=None, dtypes=(torch.float32, torch.float16)):
    """[(precision, encoder ms per window, decoder ms per token)] for each of `dtypes`."""
    if config is None:
        # Whisper tiny.en's dimensions.
        config = WhisperConfig(
            vocab_size=51864, num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
            encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
            max_source_positions=1500, max_target_positions=448,
        )
    rows = []
    for dtype in dtypes:
        model = WhisperForConditionalGeneration(config).to("cuda", dtype).eval()
        mel = torch.randn(1, config.num_mel_bins, 3000, device="cuda", dtype=dtype)
        with torch.inference_mode():
            encoder = model.model.encoder
            enc_ms = median_ms(lambda: encoder(mel))
            hidden = encoder(mel).last_hidden_state
            prompt = torch.tensor([[50257, 50362]], device="cuda")
            out = model(encoder_outputs=(hidden,), decoder_input_ids=prompt, use_cache=True)
            cache = out.past_key_values
            token = torch.tensor([[220]], device="cuda")
            # One step at position 2 on a copy of the prompt's cache each time, so every timed
            # step sees the same cache length.
            def step():
                model(encoder_outputs=(hidden,), decoder_input_ids=token, past_key_values=cache, use_cache=False)
            dec_ms = median_ms(step)
        rows.append((str(dtype).replace("torch.", "").replace("float", "fp"), enc_ms, dec_ms))
    return rows


def main():
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"{'precision':<10} {'encoder ms/window':>18} {'decoder ms/token':>17}")
    for name, enc_ms, dec_ms in measure():
        print(f"{name:<10} {enc_ms:>18.3f} {dec_ms:>17.3f}")


if __name__ == "__main__":
    main()
