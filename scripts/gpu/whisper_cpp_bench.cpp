// Times whisper.cpp (its public C API, whisper.h) the way `susurrus bench` times susurrus, so
// that the two sets of figures mean the same thing:
//   encoder: whisper_encode on one 30 s window of the clip's log-mel (conv stem, encoder
//            layers and the cross-attention K/V, to completion on the device), median of --runs;
//   decoder: a prefill of <|startoftranscript|><|notimestamps|>, then --tokens single-token
//            whisper_decode calls at positions 2, 3, ..., each followed by the greedy argmax
//            over the logits (which whisper_decode has copied to the host): median over all
//            steps of all runs. The token fed is the argmax, or 220 (" ") when the argmax is a
//            special token, so that end-of-text never ends the loop;
//   transcribe: whisper_full (greedy, English, timestamps on, whisper.cpp's default
//            temperature fallback) on the whole clip, median of --runs; its text is printed.
// Everything is warmed up first (the CUDA back end captures graphs on the second call).
//
// Build (against a whisper.cpp build tree BUILD and its source SRC):
//   c++ -O2 -std=c++17 scripts/gpu/whisper_cpp_bench.cpp -ISRC/include -ISRC/ggml/include
//       -LBUILD/bin -lwhisper -lggml -lggml-base -Wl,-rpath,BUILD/bin -o whisper_cpp_bench
// (one line; BUILD/bin holds the shared libraries of a default CMake build).
// Run:
//   whisper_cpp_bench MODEL.bin CLIP.wav [--runs N] [--tokens N] [--threads N] [--no-gpu] [--no-fa]
// CLIP.wav: 16 kHz mono 16-bit PCM. Output: `key=value` lines (prefixed "whisper_cpp "),
// then one JSON object on the last line.
//
// Conversion check (no timing):
//   whisper_cpp_bench MODEL.bin --greedy-mel MEL.f32 [--suppress 1,2,7,...] [--no-gpu] [--no-fa]
// sets a given log-mel window (f32le [n_mels][3000], e.g. faster-whisper's), encodes it and
// decodes greedily from <|startoftranscript|><|notimestamps|> with raw logits: the --suppress
// ids never chosen, blank (220) and end-of-text not as the first token (CTranslate2's
// suppress_blank), until end-of-text or 200 tokens. Prints `ids=...` and the sum of the chosen
// tokens' log-probabilities (end-of-text excluded and included), to compare with CTranslate2's
// greedy `generate` on the same window.

#include "whisper.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

static double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static uint32_t le32(const unsigned char * p) { return p[0] | (p[1] << 8) | (p[2] << 16) | ((uint32_t) p[3] << 24); }
static uint16_t le16(const unsigned char * p) { return (uint16_t) (p[0] | (p[1] << 8)); }

// A RIFF/WAVE file of 16 kHz mono 16-bit PCM as floats in [-1, 1).
static bool read_wav(const char * path, std::vector<float> & out) {
    std::ifstream f(path, std::ios::binary);
    std::vector<unsigned char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (b.size() < 12 || memcmp(b.data(), "RIFF", 4) != 0 || memcmp(b.data() + 8, "WAVE", 4) != 0) {
        fprintf(stderr, "%s: not a RIFF/WAVE file\n", path);
        return false;
    }
    bool fmt_ok = false;
    for (size_t pos = 12; pos + 8 <= b.size();) {
        const uint32_t size = le32(&b[pos + 4]);
        const unsigned char * body = &b[pos + 8];
        if (memcmp(&b[pos], "fmt ", 4) == 0 && size >= 16) {
            const uint16_t format = le16(body), channels = le16(body + 2), bits = le16(body + 14);
            const uint32_t rate = le32(body + 4);
            fmt_ok = (format == 1 || format == 0xFFFE) && channels == 1 && bits == 16 && rate == 16000;
            if (!fmt_ok) {
                fprintf(stderr, "%s: need 16 kHz mono 16-bit PCM (got format %u, %u ch, %u bit, %u Hz)\n",
                        path, format, channels, bits, rate);
                return false;
            }
        } else if (memcmp(&b[pos], "data", 4) == 0 && fmt_ok) {
            const size_t n = std::min<size_t>(size, b.size() - pos - 8) / 2;
            out.resize(n);
            for (size_t i = 0; i < n; i++) out[i] = (int16_t) le16(body + 2 * i) / 32768.0f;
            return true;
        }
        pos += 8 + size + (size & 1);
    }
    fprintf(stderr, "%s: no fmt/data chunk\n", path);
    return false;
}

static int argmax(const float * logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

// whisper_get_logits holds one row per token of the last whisper_decode call (rows of tokens
// without logits left unset): the next token's logits are the last row.
static const float * last_logits(whisper_context * ctx, int n_tokens) {
    return whisper_get_logits(ctx) + (size_t) (n_tokens - 1) * whisper_n_vocab(ctx);
}

static std::string json_escape(const std::string & s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += (char) c; }
        else if (c < 0x20) { char buf[8]; snprintf(buf, sizeof buf, "\\u%04x", c); o += buf; }
        else o += (char) c;
    }
    return o;
}

static whisper_context * load(const char * model, bool use_gpu, bool flash_attn) {
    ggml_backend_load_all();
    whisper_context_params cparams = whisper_context_default_params();
    cparams.use_gpu = use_gpu;
    cparams.flash_attn = flash_attn;
    whisper_context * ctx = whisper_init_from_file_with_params(model, cparams);
    if (!ctx) fprintf(stderr, "failed to load %s\n", model);
    return ctx;
}

static int greedy_mel(const char * model, const char * mel_path, const std::vector<int> & suppress,
                      bool use_gpu, bool flash_attn, int threads) {
    whisper_context * ctx = load(model, use_gpu, flash_attn);
    if (!ctx) return 1;
    const int n_mel = whisper_model_n_mels(ctx);
    std::ifstream f(mel_path, std::ios::binary);
    std::vector<float> mel(n_mel * 3000);
    if (!f.read(reinterpret_cast<char *>(mel.data()), mel.size() * sizeof(float))) {
        fprintf(stderr, "%s: expected %zu floats\n", mel_path, mel.size());
        return 1;
    }
    if (whisper_set_mel(ctx, mel.data(), 3000, n_mel) != 0 || whisper_encode(ctx, 0, threads) != 0) {
        fprintf(stderr, "set_mel/encode failed\n");
        return 1;
    }
    const int n_vocab = whisper_n_vocab(ctx);
    const whisper_token eot = whisper_token_eot(ctx);
    std::vector<whisper_token> seq = { whisper_token_sot(ctx), whisper_token_not(ctx) };
    if (whisper_decode(ctx, seq.data(), 2, 0, threads) != 0) return 1;
    std::vector<int> ids;
    double sum = 0.0, sum_eot = 0.0;
    bool ended = false;
    for (int step = 0; step < 200; step++) {
        const float * row = last_logits(ctx, step == 0 ? 2 : 1);
        std::vector<float> logits(row, row + n_vocab);
        for (int id : suppress) if (id >= 0 && id < n_vocab) logits[id] = -INFINITY;
        if (step == 0) { logits[220] = -INFINITY; logits[eot] = -INFINITY; }
        const int best = argmax(logits.data(), n_vocab);
        double mx = logits[best], z = 0.0;
        for (float l : logits) z += std::exp((double) l - mx);
        const double logprob = (double) logits[best] - mx - std::log(z);
        if (best == eot) { sum_eot = sum + logprob; ended = true; break; }
        sum += logprob;
        ids.push_back(best);
        const whisper_token token = best;
        if (whisper_decode(ctx, &token, 1, 2 + step, threads) != 0) return 1;
    }
    printf("ids=");
    for (size_t i = 0; i < ids.size(); i++) printf("%s%d", i ? "," : "", ids[i]);
    printf("\nsum_logprob=%.6f\nsum_logprob_with_eot=%.6f\nn=%zu\nended=%s\n", sum, ended ? sum_eot : sum,
           ids.size(), ended ? "end_of_text" : "max_tokens");
    std::string text;
    for (int id : ids) text += whisper_token_to_str(ctx, id);
    printf("text=%s\n", text.c_str());
    whisper_free(ctx);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc >= 4 && std::string(argv[2]) == "--greedy-mel") {
        std::vector<int> suppress;
        bool use_gpu = true, flash_attn = true;
        int threads = 4;
        for (int i = 4; i < argc; i++) {
            std::string a = argv[i];
            if (a == "--suppress" && i + 1 < argc) {
                std::string list = argv[++i];
                for (size_t p = 0; p < list.size();) {
                    size_t q = list.find(',', p);
                    if (q == std::string::npos) q = list.size();
                    if (q > p) suppress.push_back(atoi(list.substr(p, q - p).c_str()));
                    p = q + 1;
                }
            } else if (a == "--no-gpu") use_gpu = false;
            else if (a == "--no-fa") flash_attn = false;
            else if (a == "--threads" && i + 1 < argc) threads = atoi(argv[++i]);
            else { fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
        }
        return greedy_mel(argv[1], argv[3], suppress, use_gpu, flash_attn, threads);
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.bin CLIP.wav [--runs N] [--tokens N] [--threads N] [--no-gpu] [--no-fa]\n", argv[0]);
        return 2;
    }
    const char * model = argv[1];
    const char * clip = argv[2];
    int runs = 20, tokens = 64, threads = 4;
    bool use_gpu = true, flash_attn = true;
    for (int i = 3; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc) runs = atoi(argv[++i]);
        else if (a == "--tokens" && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (a == "--threads" && i + 1 < argc) threads = atoi(argv[++i]);
        else if (a == "--no-gpu") use_gpu = false;
        else if (a == "--no-fa") flash_attn = false;
        else { fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
    }
    if (runs < 1 || tokens < 1) { fprintf(stderr, "--runs and --tokens must be positive\n"); return 2; }

    std::vector<float> pcm;
    if (!read_wav(clip, pcm)) return 1;
    const double audio_s = pcm.size() / 16000.0;

    auto t_load = Clock::now();
    whisper_context * ctx = load(model, use_gpu, flash_attn);
    if (!ctx) return 1;
    const double load_ms = ms_since(t_load);

    if (whisper_pcm_to_mel(ctx, pcm.data(), (int) pcm.size(), threads) != 0) {
        fprintf(stderr, "whisper_pcm_to_mel failed\n");
        return 1;
    }

    // Encoder.
    for (int i = 0; i < 3; i++) {
        if (whisper_encode(ctx, 0, threads) != 0) { fprintf(stderr, "whisper_encode failed\n"); return 1; }
    }
    std::vector<double> enc;
    for (int r = 0; r < runs; r++) {
        auto t = Clock::now();
        if (whisper_encode(ctx, 0, threads) != 0) { fprintf(stderr, "whisper_encode failed\n"); return 1; }
        enc.push_back(ms_since(t));
    }

    // Decoder: one untimed pass to warm up, then `runs` timed passes.
    const int n_vocab = whisper_n_vocab(ctx);
    const whisper_token eot = whisper_token_eot(ctx);
    const whisper_token prompt[2] = { whisper_token_sot(ctx), whisper_token_not(ctx) };
    if (whisper_is_multilingual(ctx)) {
        fprintf(stderr, "note: multilingual model; the prompt has no language token\n");
    }
    std::vector<double> steps;
    for (int r = 0; r <= runs; r++) {
        if (whisper_decode(ctx, prompt, 2, 0, threads) != 0) { fprintf(stderr, "whisper_decode failed\n"); return 1; }
        int choice = argmax(last_logits(ctx, 2), n_vocab);
        for (int s = 0; s < tokens; s++) {
            const whisper_token token = choice >= eot ? 220 : choice;
            auto t = Clock::now();
            if (whisper_decode(ctx, &token, 1, 2 + s, threads) != 0) { fprintf(stderr, "whisper_decode failed\n"); return 1; }
            choice = argmax(last_logits(ctx, 1), n_vocab);
            if (r > 0) steps.push_back(ms_since(t));
        }
    }

    // Whole transcription of the clip.
    whisper_full_params fp = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    fp.n_threads = threads;
    fp.language = "en";
    fp.print_progress = false;
    fp.print_realtime = false;
    fp.print_timestamps = false;
    fp.print_special = false;
    std::vector<double> full;
    std::string text;
    for (int r = 0; r <= runs; r++) {
        auto t = Clock::now();
        if (whisper_full(ctx, fp, pcm.data(), (int) pcm.size()) != 0) { fprintf(stderr, "whisper_full failed\n"); return 1; }
        const double ms = ms_since(t);
        if (r > 0) full.push_back(ms);
        if (r == runs) {
            for (int i = 0; i < whisper_full_n_segments(ctx); i++) text += whisper_full_get_segment_text(ctx, i);
        }
    }

    const double enc_ms = median(enc), dec_ms = median(steps), full_ms = median(full);
    printf("whisper_cpp system_info=%s\n", whisper_print_system_info());
    printf("whisper_cpp use_gpu=%d flash_attn=%d threads=%d runs=%d tokens=%d\n", use_gpu, flash_attn, threads, runs, tokens);
    printf("whisper_cpp load_ms=%.1f\n", load_ms);
    printf("whisper_cpp encoder_ms_per_window=%.3f (median of %d; min %.3f)\n", enc_ms, runs, *std::min_element(enc.begin(), enc.end()));
    printf("whisper_cpp decoder_ms_per_token=%.4f (median of %zu steps; min %.4f)\n", dec_ms, steps.size(), *std::min_element(steps.begin(), steps.end()));
    printf("whisper_cpp transcribe_ms=%.2f audio_s=%.2f rtf=%.5f (median of %d)\n", full_ms, audio_s, full_ms / 1000.0 / audio_s, runs);
    printf("whisper_cpp text=%s\n", text.c_str());
    printf("{\"load_ms\": %.3f, \"encoder_ms_per_window\": %.4f, \"decoder_ms_per_token\": %.5f, "
           "\"transcribe_ms\": %.3f, \"audio_s\": %.3f, \"real_time_factor\": %.6f, \"runs\": %d, \"tokens\": %d, "
           "\"use_gpu\": %s, \"flash_attn\": %s, \"text\": \"%s\"}\n",
           load_ms, enc_ms, dec_ms, full_ms, audio_s, full_ms / 1000.0 / audio_s, runs, tokens,
           use_gpu ? "true" : "false", flash_attn ? "true" : "false", json_escape(text).c_str());
    whisper_free(ctx);
    return 0;
}
