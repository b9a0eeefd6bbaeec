#!/usr/bin/env python3
"""PyTorch peer figures for `susurrus bench` on a GPU: Whisper tiny.en's shapes (or another
config's) in Hugging Face transformers (random weights: timing does not depend on them), one
30 s encoder window and one decoder step with a KV cache, fp32 and fp16 run eagerly, and fp16
replayed from a CUDA graph (the launch overhead gone: PyTorch's best case for small models),
median of CUDA-synchronised runs. Run on the GPU machine beside `susurrus bench --backend wgpu`;
prints one table."""
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


def graphed(fn):
    """`fn` captured once in a CUDA graph; returns the graph's replay. Capture needs the work
    warmed up on a side stream first (allocator pools, lazy initialisation)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def measure(config=None, dtypes=(torch.float32, torch.float16), cuda_graph=True):
    """[(precision, encoder ms per window, decoder ms per token)] for each of `dtypes`, then
    ("fp16 CUDA graph", ...) when `cuda_graph` (encoder and step captured as graphs; when capture
    fails the reason is printed and the row left out)."""
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
            # One step at position 2: it reads the prompt's self-attention cache and the
            # cross-attention K/V computed once by the prompt pass (use_cache=False would do
            # neither: no past keys, K/V of the encoder output projected again every step), then
            # the step's own key is cropped off again, so every timed step (and the CUDA graph's
            # one captured step) sees the same 2 cached positions.
            def step():
                model(encoder_outputs=(hidden,), decoder_input_ids=token, past_key_values=cache, use_cache=True)
                cache.crop(-1)
            dec_ms = median_ms(step)
            rows.append((str(dtype).replace("torch.", "").replace("float", "fp"), enc_ms, dec_ms))
            if cuda_graph and dtype == torch.float16:
                try:
                    # The step's inputs are static tensors, so each replay is the same step.
                    rows.append(("fp16 CUDA graph", median_ms(graphed(lambda: encoder(mel))), median_ms(graphed(step))))
                except RuntimeError as e:
                    print(f"PyTorch fp16 CUDA graph: capture failed: {e}")
    return rows


def main():
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"{'precision':<10} {'encoder ms/window':>18} {'decoder ms/token':>17}")
    for name, enc_ms, dec_ms in measure():
        print(f"{name:<10} {enc_ms:>18.3f} {dec_ms:>17.3f}")


if __name__ == "__main__":
    main()
