//! The program's calls against each other and across backends: steps against prefill, chains
//! against single steps, beams and groups against windows decoded alone, alignment rows.

use super::*;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::ir::DType;

use crate::load::weights::testing::{multilingual_config, small_config};

fn spec() -> ProgramSpec {
    ProgramSpec {
        selection: Selection {
            suppress: vec![1, 3],
            blank: vec![7],
            timestamp_begin: 15,
            end_of_text: 11,
            no_timestamps: 14,
            penalties: false,
        },
        no_speech: 12,
        beams: 3,
        alignment: true,
        long_prompts: false,
        groups: 0,
    }
}

fn program(backend: &dyn Backend) -> Program {
    program_of(backend, small_config())
}

fn program_of(backend: &dyn Backend, config: crate::load::config::WhisperConfig) -> Program {
    let model = crate::load::weights::testing::random(config, DType::F16, 7);
    let model = ModelWeights::new(&model).unwrap();
    let mut p = pollster::block_on(Program::compile(backend, &model, &spec())).unwrap();
    let c = &model.config;
    let mel: Vec<f32> = (0..c.n_mels * c.n_frames()).map(|i| ((i * 37) % 11) as f32 / 11.0 - 0.5).collect();
    let mel = Tensor::f32([c.n_mels, c.n_frames()], mel).unwrap();
    pollster::block_on(p.encode(&mel, false)).unwrap();
    p
}

/// Feeding tokens one step at a time through the KV cache gives what one prefill of the
/// whole sequence gives: the cache, the positions and the masks line up.
fn steps_match_prefill(backend: &dyn Backend) {
    let mut p = program(backend);
    let rules = Rules::default();
    let whole = pollster::block_on(p.prefill(&[10, 2, 4, 5], 0, &rules, Sampling::Greedy)).unwrap();
    let first = pollster::block_on(p.prefill(&[10, 2], 0, &rules, Sampling::Greedy)).unwrap();
    assert_eq!(first.no_speech_prob, whole.no_speech_prob);
    let h = p.history(&[4], false).unwrap();
    let _ = pollster::block_on(p.step(&h, 2, Sampling::Greedy)).unwrap();
    let h = p.history(&[4, 5], false).unwrap();
    let last = pollster::block_on(p.step(&h, 3, Sampling::Greedy)).unwrap();
    assert_eq!(last.token, whole.token);
    assert!((last.logprob - whole.logprob).abs() < 1e-4, "{last:?} vs {whole:?}");
    let p_ns = whole.no_speech_prob.unwrap();
    assert!((0.0..=1.0).contains(&p_ns));
}

/// A chain of steps fed on the device chooses what steps run one at a time choose, each
/// fed its token by the host, with the timestamp rules on.
fn chains_match_single_steps(backend: &dyn Backend) {
    let mut p = program(backend);
    let prompt = [10, 2];
    let first = pollster::block_on(p.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy)).unwrap();
    let mut seq = vec![first.token];
    let mut single = Vec::new();
    for position in prompt.len()..p.n_text_ctx() {
        let h = p.history(&seq, true).unwrap();
        let c = pollster::block_on(p.step(&h, position, Sampling::Greedy)).unwrap();
        seq.push(c.token);
        single.push(c);
    }
    let again = pollster::block_on(p.prefill(&prompt, 0, &Rules::default(), Sampling::Greedy)).unwrap();
    assert_eq!(again, first);
    let h = p.history(&[first.token], true).unwrap();
    let chained = pollster::block_on(p.steps(&h, prompt.len(), single.len())).unwrap();
    let want = if backend.name().starts_with("wgpu") { single.len() } else { 1 };
    assert_eq!(chained.len(), want, "{}", backend.name());
    assert_eq!(chained, single[..want], "{}", backend.name());
}

/// The best continuation of `prompt + seq` and its log-probability, from a prefill of the
/// whole sequence: the oracle of the beam tests.
fn after(p: &mut Program, prompt: &[u32], seq: &[u32]) -> Choice {
    let whole: Vec<u32> = prompt.iter().chain(seq).copied().collect();
    pollster::block_on(p.prefill(&whole, 0, &Rules::default(), Sampling::Greedy)).unwrap()
}

/// Beams as a batch: the prefill's best candidate is the greedy choice, and after each
/// beam step every beam's best candidate is what a prefill of that beam's whole sequence
/// chooses, its score the beam's plus the choice's log-probability — with beams that
/// swap and share parents, so every cache row must follow its beam.
fn beams_follow_their_sequences(backend: &dyn Backend) {
    let mut p = program(backend);
    let prompt = [10, 2];
    let greedy = after(&mut p, &prompt, &[]);
    let (no_speech, first) = pollster::block_on(p.beam_prefill(&prompt, 0, &Rules::default(), 3)).unwrap();
    assert_eq!(Some(no_speech), greedy.no_speech_prob);
    assert_eq!(first.len(), 6);
    assert!(first.iter().all(|c| c.beam == 0));
    assert_eq!(first[0].token, greedy.token);
    assert!((first[0].score - greedy.logprob).abs() < 1e-4, "{first:?} vs {greedy:?}");
    assert!(first.windows(2).all(|w| w[0].score >= w[1].score), "{first:?}");
    // Three beams from the prefill's candidates 2, 0 and 1, then three rounds in which
    // the beams continue the candidates of ranks 1, 0, 2 (whichever beams they extend).
    let mut beams: Vec<(Vec<u32>, f32)> = [2, 0, 1].iter().map(|&r| (vec![first[r].token], first[r].score)).collect();
    let mut parents = vec![0, 0, 0];
    for round in 0..3 {
        let position = prompt.len() + round;
        let inputs: Vec<BeamInput> = beams
            .iter()
            .zip(&parents)
            .map(|((seq, score), &parent)| BeamInput { history: p.history(seq, false).unwrap(), parent, score: *score })
            .collect();
        let got = pollster::block_on(p.beam_step(&inputs, position, false)).unwrap();
        assert_eq!(got.len(), 6);
        assert!(got.windows(2).all(|w| w[0].score >= w[1].score), "{got:?}");
        for (b, (seq, score)) in beams.iter().enumerate() {
            let Some(best) = got.iter().find(|c| c.beam == b) else { continue };
            let want = after(&mut p, &prompt, seq);
            assert_eq!(best.token, want.token, "round {round} beam {b}: {got:?}");
            assert!((best.score - (score + want.logprob)).abs() < 1e-4, "round {round} beam {b}: {got:?} vs {want:?}");
        }
        // The oracle's prefills overwrote the one-sequence caches only; the beams'
        // caches are theirs. Next: continue ranks 1, 0, 2.
        let next: Vec<Candidate> = [1, 0, 2].iter().map(|&r| got[r]).collect();
        beams = next.iter().map(|c| ([beams[c.beam].0.clone(), vec![c.token]].concat(), c.score)).collect();
        parents = next.iter().map(|c| c.beam).collect();
    }
    // Fewer beams than the graph has: the others run dead and never rank.
    let (_, first) = pollster::block_on(p.beam_prefill(&prompt, 0, &Rules::default(), 2)).unwrap();
    let inputs: Vec<BeamInput> = first[..2]
        .iter()
        .map(|c| BeamInput { history: p.history(&[c.token], false).unwrap(), parent: 0, score: c.score })
        .collect();
    let got = pollster::block_on(p.beam_step(&inputs, prompt.len(), false)).unwrap();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|c| c.beam < 2 && c.score.is_finite()), "{got:?}");
    let err = pollster::block_on(p.beam_step(&inputs[..1], prompt.len(), false)).unwrap_err().to_string();
    assert!(err.contains("1 beams, where this program runs 2 to 3"), "{err}");
}

/// The beams after `got` (ranked candidates) continuing ranks 1, 0, 2 of it: the
/// sequences with their scores, and the inputs of the next beam or group step.
fn continue_ranks(p: &Program, beams: &[(Vec<u32>, f32)], got: &[Candidate]) -> (Vec<(Vec<u32>, f32)>, Vec<BeamInput>) {
    let next: Vec<Candidate> = [1, 0, 2].iter().map(|&r| got[r]).collect();
    let grown: Vec<(Vec<u32>, f32)> =
        next.iter().map(|c| ([beams[c.beam].0.clone(), vec![c.token]].concat(), c.score)).collect();
    let inputs = grown
        .iter()
        .zip(&next)
        .map(|((seq, score), c)| BeamInput { history: p.history(seq, true).unwrap(), parent: c.beam, score: *score })
        .collect();
    (grown, inputs)
}

fn assert_same(got: &[Candidate], want: &[Candidate], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.beam, g.token), (w.beam, w.token), "{what}: {got:?} vs {want:?}");
        assert!((g.score - w.score).abs() < 1e-4, "{what}: {got:?} vs {want:?}");
    }
}

/// Two windows in groups, the second joining a step after the first with a longer
/// prompt (so their positions and ring slots differ, and the ring of 5 slots wraps),
/// a free group between them: each group's candidates at every step are those of its
/// window's beam search run alone.
fn groups_decode_as_windows_alone(backend: &dyn Backend) {
    let model = crate::load::weights::testing::random(small_config(), DType::F16, 7);
    let model = ModelWeights::new(&model).unwrap();
    let spec = ProgramSpec { groups: 3, ..spec() };
    let mut p = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
    assert_eq!((p.max_groups(), p.max_beams()), (3, 3));
    let c = &model.config;
    let mel = |k: usize| {
        let values = (0..c.n_mels * c.n_frames()).map(|i| ((i * 37 + k * 13) % 11) as f32 / 11.0 - 0.5).collect();
        Tensor::f32([c.n_mels, c.n_frames()], values).unwrap()
    };
    let windows = [(mel(0), vec![10u32, 2]), (mel(1), vec![10u32, 2, 4])];
    let rules = Rules::default();
    // Alone: the prefill's candidates, then each round's, continuing ranks 1, 0, 2.
    let mut alone: Vec<Vec<Vec<Candidate>>> = Vec::new();
    for (mel, prompt) in &windows {
        pollster::block_on(p.encode(mel, false)).unwrap();
        let (_, first) = pollster::block_on(p.beam_prefill(prompt, 0, &rules, 3)).unwrap();
        let mut beams: Vec<(Vec<u32>, f32)> = vec![(vec![], 0.0)];
        let mut rounds = vec![first.clone()];
        let mut got = first;
        for position in prompt.len()..c.n_text_ctx {
            let inputs;
            (beams, inputs) = continue_ranks(&p, &beams, &got);
            got = pollster::block_on(p.beam_step(&inputs, position, true)).unwrap();
            rounds.push(got.clone());
        }
        alone.push(rounds);
    }
    // Together: window 0 joins group 0 before step 0 (slot 0), window 1 group 2 before
    // step 1 (slot 1).
    let mut beams: Vec<Vec<(Vec<u32>, f32)>> = vec![vec![(vec![], 0.0)]; 2];
    let mut got: Vec<Vec<Candidate>> = vec![Vec::new(); 2];
    let mut from = [0usize; 2];
    let ctx = c.n_text_ctx;
    for slot in 0..3 {
        if slot < 2 {
            let (mel, prompt) = &windows[slot];
            pollster::block_on(p.encode(mel, false)).unwrap();
            let (_, first) = pollster::block_on(p.group_prefill(prompt, 0, &rules)).unwrap();
            assert_same(&first, &alone[slot][0], &format!("window {slot}'s prefill"));
            pollster::block_on(p.join_group(2 * slot, prompt.len(), slot)).unwrap();
            from[slot] = (slot + ctx - prompt.len()) % ctx;
            got[slot] = first;
        }
        let mut groups: Vec<Option<GroupInput>> = vec![None; 3];
        let mut stepped = Vec::new();
        for w in 0..2 {
            let step = if slot >= w { slot - w } else { continue };
            let position = windows[w].1.len() + step;
            if position >= ctx {
                continue;
            }
            let inputs;
            (beams[w], inputs) = continue_ranks(&p, &beams[w], &got[w]);
            groups[2 * w] = Some(GroupInput { beams: inputs, position, from: from[w] });
            stepped.push((w, step));
        }
        let out = pollster::block_on(p.group_step(&groups, slot, true)).unwrap();
        assert!(out[1].is_none());
        for (w, step) in stepped {
            got[w] = out[2 * w].clone().unwrap();
            assert_same(&got[w], &alone[w][step + 1], &format!("window {w}, step {step}"));
        }
    }
    let err = pollster::block_on(p.group_step(&[None, None], 0, true)).unwrap_err().to_string();
    assert!(err.contains("2 groups for a program of 3"), "{err}");
}

/// Three windows encoded together (by the encoder of 4 windows, the fourth repeating
/// the first) into groups 4, 1 and 2 of 5: each one's prefill, taken from its group,
/// gives what it gives on the window encoded alone.
fn windows_encoded_together_prefill_as_alone(backend: &dyn Backend) {
    let model = crate::load::weights::testing::random(small_config(), DType::F16, 11);
    let model = ModelWeights::new(&model).unwrap();
    let spec = ProgramSpec { groups: 5, ..spec() };
    let mut p = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
    let c = &model.config;
    let mel = |k: usize| {
        let values = (0..c.n_mels * c.n_frames()).map(|i| ((i * 29 + k * 17) % 13) as f32 / 13.0 - 0.5).collect();
        Tensor::f32([c.n_mels, c.n_frames()], values).unwrap()
    };
    let mels = [mel(0), mel(1), mel(2)];
    let (prompt, rules) = ([10u32, 2, 4], Rules::default());
    let alone: Vec<(f32, Vec<Candidate>)> = mels
        .iter()
        .map(|m| {
            pollster::block_on(p.encode(m, false)).unwrap();
            pollster::block_on(p.group_prefill(&prompt, 0, &rules)).unwrap()
        })
        .collect();
    let groups = [4, 1, 2];
    let windows: Vec<(&Tensor, usize)> = mels.iter().zip(groups).collect();
    pollster::block_on(p.encode_groups(&windows)).unwrap();
    // Taken in another order than encoded, the last encoded window's prefill in between.
    for w in [1, 0, 2] {
        pollster::block_on(p.take_group(groups[w])).unwrap();
        let (no_speech, first) = pollster::block_on(p.group_prefill(&prompt, 0, &rules)).unwrap();
        assert!((no_speech - alone[w].0).abs() < 1e-5, "window {w}: {no_speech} vs {}", alone[w].0);
        assert_same(&first, &alone[w].1, &format!("window {w}'s prefill"));
    }
    let err = pollster::block_on(p.encode_groups(&[(&mels[0], 5), (&mels[1], 0)])).unwrap_err().to_string();
    assert!(err.contains("group 5 of 5"), "{err}");
    let err = pollster::block_on(p.take_group(5)).unwrap_err().to_string();
    assert!(err.contains("group 5 of 5"), "{err}");
}

susurrus_testkit::for_each_backend!(fn windows_encoded_together_prefill_as_alone(backend) {
    windows_encoded_together_prefill_as_alone(backend.as_ref());
});

susurrus_testkit::for_each_backend!(fn groups_decode_as_windows_alone(backend) {
    groups_decode_as_windows_alone(backend.as_ref());
});

susurrus_testkit::for_each_backend!(fn beams_follow_their_sequences(backend) {
    beams_follow_their_sequences(backend.as_ref());
});

/// The alignment graph: each head's row is a softmax over the window's frames only, the
/// next-token probabilities are probabilities, and the CPU reference and wgpu agree.
#[test]
fn alignment_rows_are_softmaxes_over_the_window_on_both_backends() {
    let wgpu = susurrus_testkit::backends::wgpu();
    let mut results = Vec::new();
    for backend in [&CpuBackend::new() as &dyn Backend, wgpu.as_ref()] {
        let mut p = program(backend);
        assert!(p.can_align());
        let a = pollster::block_on(p.align(&[10, 2, 4, 5, 11], 5)).unwrap();
        assert_eq!((a.heads, a.frames, a.weights.len(), a.next_probs.len()), (2, 5, 2 * 5 * 5, 4));
        for row in a.weights.chunks(5) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
        }
        assert!(a.next_probs.iter().all(|&p| p > 0.0 && p <= 1.0), "{:?}", a.next_probs);
        let err = pollster::block_on(p.align(&[10, 2], 0)).unwrap_err().to_string();
        assert!(err.contains("0 audio positions"), "{err}");
        results.push(a);
    }
    for (c, w) in results[0].weights.iter().zip(&results[1].weights) {
        assert!((c - w).abs() < 1e-4, "cpu {c} wgpu {w}");
    }
    for (c, w) in results[0].next_probs.iter().zip(&results[1].next_probs) {
        assert!((c - w).abs() < 1e-4, "cpu {c} wgpu {w}");
    }
}

/// More alignment heads than one kernel binds inputs (9, each head listed twice or more):
/// the alignment graph still compiles and runs on wgpu, with the CPU's weights.
#[test]
fn alignment_of_many_heads_runs_on_wgpu() {
    let mut config = small_config();
    config.generation.alignment_heads = [(0, 0), (0, 1), (1, 0), (1, 1)].repeat(2);
    config.generation.alignment_heads.push((1, 1));
    let wgpu = susurrus_testkit::backends::wgpu();
    let mut weights = Vec::new();
    for backend in [&CpuBackend::new() as &dyn Backend, wgpu.as_ref()] {
        let mut p = program_of(backend, config.clone());
        let a = pollster::block_on(p.align(&[10, 2, 4, 11], 6)).unwrap();
        assert_eq!((a.heads, a.weights.len()), (9, 9 * 4 * 6));
        weights.push(a.weights);
    }
    for (c, w) in weights[0].iter().zip(&weights[1]) {
        assert!((c - w).abs() < 1e-4, "cpu {c} wgpu {w}");
    }
}

/// Banned ranges, the blank ids and the constant suppress list are never chosen.
fn rules_ban_tokens(backend: &dyn Backend) {
    let mut p = program(backend);
    let free = pollster::block_on(p.prefill(&[10, 2], 0, &Rules::default(), Sampling::Greedy)).unwrap();
    assert!(![1, 3].contains(&free.token));
    let rules = Rules { banned: vec![(free.token, free.token + 1)], ..Rules::default() };
    let next = pollster::block_on(p.prefill(&[10, 2], 0, &rules, Sampling::Greedy)).unwrap();
    assert_ne!(next.token, free.token);
    // Everything banned but 7, then 7 banned as blank too: all masked alike, the first
    // index wins the tie.
    let all_but_7 = Rules { banned: vec![(0, 7), (8, 20)], ..Rules::default() };
    assert_eq!(pollster::block_on(p.prefill(&[10, 2], 0, &all_but_7, Sampling::Greedy)).unwrap().token, 7);
    let none = Rules { blank: true, ..all_but_7 };
    assert_eq!(pollster::block_on(p.prefill(&[10, 2], 0, &none, Sampling::Greedy)).unwrap().token, 0);
}

/// A multilingual, 128-mel model (large-v3's vocabulary and mel count, tiny sizes) builds,
/// compiles and runs on both backends with the same choice.
#[test]
fn multilingual_128_mel_models_run() {
    let weights = crate::load::weights::testing::random(multilingual_config(), DType::F32, 5);
    let model = ModelWeights::new(&weights).unwrap();
    let c = &model.config;
    let spec = ProgramSpec {
        selection: Selection {
            suppress: vec![1, 2],
            blank: vec![220, 50257],
            timestamp_begin: 50365,
            end_of_text: 50257,
            no_timestamps: 50364,
            penalties: false,
        },
        no_speech: 50363,
        beams: 0,
        alignment: false,
        long_prompts: false,
        groups: 0,
    };
    let mel =
        Tensor::f32([128, c.n_frames()], (0..128 * c.n_frames()).map(|i| (i % 7) as f32 / 7.0).collect()).unwrap();
    let mut choices = Vec::new();
    let wgpu = susurrus_testkit::backends::wgpu();
    for backend in [&CpuBackend::new() as &dyn Backend, wgpu.as_ref()] {
        let mut p = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
        assert_eq!(p.max_prompt(), 3);
        pollster::block_on(p.encode(&mel, false)).unwrap();
        let first = pollster::block_on(p.prefill(&[50258, 50259], 0, &Rules::default(), Sampling::Greedy)).unwrap();
        let h = p.history(&[first.token], true).unwrap();
        let next = pollster::block_on(p.step(&h, 2, Sampling::Greedy)).unwrap();
        assert!(first.token < 51866 && next.token < 51866);
        choices.push((first.token, next.token));
    }
    assert_eq!(choices[0], choices[1]);
}

susurrus_testkit::for_each_backend!(fn steps_match_prefill(backend) {
    steps_match_prefill(backend.as_ref());
});

susurrus_testkit::for_each_backend!(fn chains_match_single_steps(backend) {
    chains_match_single_steps(backend.as_ref());
});

susurrus_testkit::for_each_backend!(fn rules_ban_tokens(backend) {
    rules_ban_tokens(backend.as_ref());
});
