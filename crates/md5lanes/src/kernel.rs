//! MD5 compression of one 64-byte block per lane, for up to [`LANES`] lanes at once.
//!
//! Owns the run-time choice of kernel ([`Kernel::best`]): AVX-512, where one instruction does a
//! step of MD5 for all sixteen lanes (`vpternlogd` is each round's boolean function, `vprold` its
//! rotation), AVX2 (eight lanes per call), or a scalar kernel that compresses the active lanes one
//! after the other. Both keep
//! the state transposed (word-major), so the SIMD kernel loads it as four vectors.
//!
//! Must not: know about messages, padding or lengths (that is `lanes`'), allocate, or be reached
//! on a CPU that lacks the features its `#[target_feature]` names (only [`Kernel::best`] picks it).

/// Lanes one kernel call serves: a 512-bit vector of 32-bit words.
pub const LANES: usize = 16;

/// MD5 chaining values of every lane, transposed: `words[w][lane]` is word `w` (a, b, c, d).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct LaneStates {
    pub words: [[u32; LANES]; 4],
}

/// The initial chaining values of MD5 (RFC 1321, 3.3).
pub const INITIAL_STATE: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

impl LaneStates {
    /// The state of `lane` as MD5's four words.
    pub fn lane(&self, lane: usize) -> [u32; 4] {
        std::array::from_fn(|w| self.words[w][lane])
    }

    /// Sets the state of `lane`.
    pub fn set_lane(&mut self, lane: usize, state: [u32; 4]) {
        for (w, word) in state.into_iter().enumerate() {
            self.words[w][lane] = word;
        }
    }
}

/// One block per lane, lane-major: `blocks[lane]` is the lane's next 64 bytes.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct LaneBlocks {
    pub blocks: [[u8; 64]; LANES],
}

impl Default for LaneBlocks {
    fn default() -> Self {
        Self { blocks: [[0; 64]; LANES] }
    }
}

/// Active lanes up to which one scalar compression per lane is cheaper than a SIMD round
/// (docs/benchmarks.md, "Multi-buffer MD5").
pub const SCALAR_MAX_LANES: u32 = 2;

/// How blocks are compressed on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Sixteen lanes per instruction (AVX-512F).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// Eight lanes per instruction (AVX2), two calls for sixteen.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// One lane after another.
    Scalar,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn best() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            // Every AVX-512 CPU has AVX2; this kernel uses it when a round's lanes fit in eight.
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx2") {
                return Self::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") {
                return Self::Avx2;
            }
        }
        Self::Scalar
    }

    /// Every kernel this CPU runs (for tests and benchmarks).
    pub fn available() -> Vec<Self> {
        #[cfg_attr(not(target_arch = "x86_64"), expect(unused_mut))]
        let mut kernels = vec![Self::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                kernels.push(Self::Avx2);
            }
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx2") {
                kernels.push(Self::Avx512);
            }
        }
        kernels
    }

    /// Compresses `blocks.blocks[lane]` into `states` for every lane whose bit is set in `active`;
    /// the other lanes' states are left as they were. With at most [`SCALAR_MAX_LANES`] lanes
    /// active the scalar kernel serves even where a SIMD one exists: a SIMD round costs the same
    /// for one lane as for sixteen.
    pub fn compress(self, states: &mut LaneStates, blocks: &LaneBlocks, active: u16) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `best` and `available` return Avx512 only after detecting AVX-512F and AVX2.
            // A round whose lanes all sit in one half of the sixteen runs as eight lanes: the
            // 256-bit kernel is faster there than the 512-bit one (docs/benchmarks.md).
            Self::Avx512 if active.count_ones() > SCALAR_MAX_LANES && (active as u8 == 0 || active >> 8 == 0) => unsafe {
                avx2::compress(states, blocks, active)
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Self::Avx512 if active.count_ones() > SCALAR_MAX_LANES => unsafe {
                avx512::compress(states, blocks, active)
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `best` and `available` return Avx2 only after detecting AVX2 on this CPU.
            Self::Avx2 if active.count_ones() > SCALAR_MAX_LANES => unsafe { avx2::compress(states, blocks, active) },
            _ => scalar_compress(states, blocks, active),
        }
    }
}

fn scalar_compress(states: &mut LaneStates, blocks: &LaneBlocks, active: u16) {
    for lane in (0..LANES).filter(|lane| active & (1 << lane) != 0) {
        let mut state = states.lane(lane);
        compress_one(&mut state, &blocks.blocks[lane]);
        states.set_lane(lane, state);
    }
}

#[cfg(target_arch = "x86_64")]
fn compress_one(state: &mut [u32; 4], block: &[u8; 64]) {
    md5_asm::compress(state, std::slice::from_ref(block));
}

#[cfg(not(target_arch = "x86_64"))]
fn compress_one(state: &mut [u32; 4], block: &[u8; 64]) {
    let words: [u32; 16] = std::array::from_fn(|w| u32::from_le_bytes(block[w * 4..w * 4 + 4].try_into().unwrap()));
    let [mut a, mut b, mut c, mut d] = *state;
    for step in 0..64 {
        let (mix, word) = match step / 16 {
            0 => ((b & c) | (!b & d), step),
            1 => ((b & d) | (c & !d), (5 * step + 1) % 16),
            2 => (b ^ c ^ d, (3 * step + 5) % 16),
            _ => (c ^ (b | !d), (7 * step) % 16),
        };
        let rotated =
            a.wrapping_add(mix).wrapping_add(K[step]).wrapping_add(words[word]).rotate_left(S[step / 16][step % 4]);
        (a, d, c, b) = (d, c, b, b.wrapping_add(rotated));
    }
    for (word, add) in state.iter_mut().zip([a, b, c, d]) {
        *word = word.wrapping_add(add);
    }
}

/// The additive constants: ⌊|sin(i + 1)| · 2³²⌋ (RFC 1321, 3.4).
pub(crate) const K: [u32; 64] = [
    0xd76a_a478,
    0xe8c7_b756,
    0x2420_70db,
    0xc1bd_ceee,
    0xf57c_0faf,
    0x4787_c62a,
    0xa830_4613,
    0xfd46_9501, //
    0x6980_98d8,
    0x8b44_f7af,
    0xffff_5bb1,
    0x895c_d7be,
    0x6b90_1122,
    0xfd98_7193,
    0xa679_438e,
    0x49b4_0821, //
    0xf61e_2562,
    0xc040_b340,
    0x265e_5a51,
    0xe9b6_c7aa,
    0xd62f_105d,
    0x0244_1453,
    0xd8a1_e681,
    0xe7d3_fbc8, //
    0x21e1_cde6,
    0xc337_07d6,
    0xf4d5_0d87,
    0x455a_14ed,
    0xa9e3_e905,
    0xfcef_a3f8,
    0x676f_02d9,
    0x8d2a_4c8a, //
    0xfffa_3942,
    0x8771_f681,
    0x6d9d_6122,
    0xfde5_380c,
    0xa4be_ea44,
    0x4bde_cfa9,
    0xf6bb_4b60,
    0xbebf_bc70, //
    0x289b_7ec6,
    0xeaa1_27fa,
    0xd4ef_3085,
    0x0488_1d05,
    0xd9d4_d039,
    0xe6db_99e5,
    0x1fa2_7cf8,
    0xc4ac_5665, //
    0xf429_2244,
    0x432a_ff97,
    0xab94_23a7,
    0xfc93_a039,
    0x655b_59c3,
    0x8f0c_cc92,
    0xffef_f47d,
    0x8584_5dd1, //
    0x6fa8_7e4f,
    0xfe2c_e6e0,
    0xa301_4314,
    0x4e08_11a1,
    0xf753_7e82,
    0xbd3a_f235,
    0x2ad7_d2bb,
    0xeb86_d391, //
];

/// The rotation of each step, by round (steps cycle through four).
#[cfg(not(target_arch = "x86_64"))]
const S: [[u32; 4]; 4] = [[7, 12, 17, 22], [5, 9, 14, 20], [4, 11, 16, 23], [6, 10, 15, 21]];

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{K, LANES, LaneBlocks, LaneStates};
    use std::arch::x86_64::*;

    /// Round functions as `vpternlogd` truth tables over (b, c, d) = (0xf0, 0xcc, 0xaa).
    const F: i32 = 0xca; // (b & c) | (!b & d)
    const G: i32 = 0xe4; // (b & d) | (c & !d)
    const H: i32 = 0x96; // b ^ c ^ d
    const I: i32 = 0x39; // c ^ (b | !d)

    /// One MD5 step for sixteen lanes: `b + rotl(a + mix(b, c, d) + k + m, s)`. The message and
    /// constant are added to `a` first: `a` is four steps old, so only the mix, one add, the
    /// rotation and the last add sit on the dependency chain.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn step<const MIX: i32, const S: i32>(
        a: __m512i,
        b: __m512i,
        c: __m512i,
        d: __m512i,
        word: __m512i,
        k: u32,
    ) -> __m512i {
        let input = _mm512_add_epi32(a, _mm512_add_epi32(word, _mm512_set1_epi32(k as i32)));
        let mixed = _mm512_add_epi32(input, _mm512_ternarylogic_epi32::<MIX>(b, c, d));
        _mm512_add_epi32(b, _mm512_rol_epi32::<S>(mixed))
    }

    /// Four steps of one round, the rotations `S0..S3` cycling; `at` is the first step's index and
    /// `word(i)` the message word of step `at + i`.
    macro_rules! four {
        ($mix:ident, $s0:literal, $s1:literal, $s2:literal, $s3:literal, $a:ident, $b:ident, $c:ident, $d:ident, $m:ident, $at:expr, $word:expr) => {{
            let word = $word;
            $a = step::<$mix, $s0>($a, $b, $c, $d, $m[word($at)], K[$at]);
            $d = step::<$mix, $s1>($d, $a, $b, $c, $m[word($at + 1)], K[$at + 1]);
            $c = step::<$mix, $s2>($c, $d, $a, $b, $m[word($at + 2)], K[$at + 2]);
            $b = step::<$mix, $s3>($b, $c, $d, $a, $m[word($at + 3)], K[$at + 3]);
        }};
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn compress(states: &mut LaneStates, blocks: &LaneBlocks, active: u16) {
        const _: () = assert!(LANES == 16);
        let base = blocks.blocks.as_ptr().cast::<i32>();
        // Word w of lane l sits at 32-bit index 16·l + w of the lane-major blocks.
        let lane_offsets = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
        // SAFETY: every gathered index is below 256, inside the 1 KiB of `blocks`.
        let m: [__m512i; 16] = std::array::from_fn(|w| unsafe {
            _mm512_i32gather_epi32::<4>(_mm512_add_epi32(lane_offsets, _mm512_set1_epi32(w as i32)), base)
        });
        let words = states.words.as_mut_ptr().cast::<__m512i>();
        // SAFETY: `LaneStates` is four 64-byte-aligned rows of sixteen u32.
        let initial: [__m512i; 4] = std::array::from_fn(|w| unsafe { _mm512_load_si512(words.add(w)) });
        let [mut a, mut b, mut c, mut d] = initial;
        for at in (0..16).step_by(4) {
            four!(F, 7, 12, 17, 22, a, b, c, d, m, at, |i: usize| i);
        }
        for at in (16..32).step_by(4) {
            four!(G, 5, 9, 14, 20, a, b, c, d, m, at, |i: usize| (5 * i + 1) % 16);
        }
        for at in (32..48).step_by(4) {
            four!(H, 4, 11, 16, 23, a, b, c, d, m, at, |i: usize| (3 * i + 5) % 16);
        }
        for at in (48..64).step_by(4) {
            four!(I, 6, 10, 15, 21, a, b, c, d, m, at, |i: usize| (7 * i) % 16);
        }
        for (w, add) in [a, b, c, d].into_iter().enumerate() {
            let updated = _mm512_mask_add_epi32(initial[w], active, initial[w], add);
            // SAFETY: as for the loads.
            unsafe { _mm512_store_si512(words.add(w), updated) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{K, LaneBlocks, LaneStates};
    use std::arch::x86_64::*;

    /// Lanes of one 256-bit vector.
    const HALF: usize = 8;

    /// One MD5 step for eight lanes. Without AVX-512's ternary logic and rotate, each round's
    /// function is written so that the fewest operations follow `b` (the newest word), and the
    /// rotation is two shifts and an or (`R` = 32 − `S`).
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    fn step<const ROUND: u8, const S: i32, const R: i32>(
        a: __m256i,
        b: __m256i,
        c: __m256i,
        d: __m256i,
        word: __m256i,
        k: u32,
    ) -> __m256i {
        let mix = match ROUND {
            // (b & c) | (!b & d) = d ^ (b & (c ^ d))
            0 => _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d))),
            // (b & d) | (c & !d): the two terms share no bit, so their sum
            1 => _mm256_add_epi32(_mm256_and_si256(b, d), _mm256_andnot_si256(d, c)),
            2 => _mm256_xor_si256(b, _mm256_xor_si256(c, d)),
            // c ^ (b | !d)
            _ => _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, _mm256_set1_epi32(-1)))),
        };
        let input = _mm256_add_epi32(a, _mm256_add_epi32(word, _mm256_set1_epi32(k as i32)));
        let mixed = _mm256_add_epi32(input, mix);
        let rotated = _mm256_or_si256(_mm256_slli_epi32::<S>(mixed), _mm256_srli_epi32::<R>(mixed));
        _mm256_add_epi32(b, rotated)
    }

    macro_rules! four {
        ($round:literal, $s0:literal, $s1:literal, $s2:literal, $s3:literal, $a:ident, $b:ident, $c:ident, $d:ident, $m:ident, $at:expr, $word:expr) => {{
            let word = $word;
            $a = step::<$round, $s0, { 32 - $s0 }>($a, $b, $c, $d, $m[word($at)], K[$at]);
            $d = step::<$round, $s1, { 32 - $s1 }>($d, $a, $b, $c, $m[word($at + 1)], K[$at + 1]);
            $c = step::<$round, $s2, { 32 - $s2 }>($c, $d, $a, $b, $m[word($at + 2)], K[$at + 2]);
            $b = step::<$round, $s3, { 32 - $s3 }>($b, $c, $d, $a, $m[word($at + 3)], K[$at + 3]);
        }};
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn compress(states: &mut LaneStates, blocks: &LaneBlocks, active: u16) {
        for half in 0..2 {
            let half_active = (active >> (HALF * half)) as u8;
            if half_active != 0 {
                // SAFETY: AVX2, as this function's contract.
                unsafe { compress_half(states, blocks, half, half_active) };
            }
        }
    }

    /// Lanes `8·half .. 8·half + 8`, those whose bit is set in `active`.
    #[target_feature(enable = "avx2")]
    unsafe fn compress_half(states: &mut LaneStates, blocks: &LaneBlocks, half: usize, active: u8) {
        let base = blocks.blocks[HALF * half..].as_ptr().cast::<i32>();
        let lane_offsets = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
        // SAFETY: every gathered index is below 128, inside this half's 512 bytes of `blocks`.
        let m: [__m256i; 16] = std::array::from_fn(|w| unsafe {
            _mm256_i32gather_epi32::<4>(base, _mm256_add_epi32(lane_offsets, _mm256_set1_epi32(w as i32)))
        });
        let rows = states.words.as_mut_ptr().cast::<u32>();
        // SAFETY: `LaneStates` is four rows of sixteen u32, contiguous; this half's eight of row w
        // start at 16·w + 8·half, inside the rows for w < 4.
        let row = |w: usize| unsafe { rows.add(16 * w + HALF * half).cast::<__m256i>() };
        // SAFETY: eight u32 at `row(w)`, as above.
        let initial: [__m256i; 4] = std::array::from_fn(|w| unsafe { _mm256_loadu_si256(row(w)) });
        let [mut a, mut b, mut c, mut d] = initial;
        for at in (0..16).step_by(4) {
            four!(0, 7, 12, 17, 22, a, b, c, d, m, at, |i: usize| i);
        }
        for at in (16..32).step_by(4) {
            four!(1, 5, 9, 14, 20, a, b, c, d, m, at, |i: usize| (5 * i + 1) % 16);
        }
        for at in (32..48).step_by(4) {
            four!(2, 4, 11, 16, 23, a, b, c, d, m, at, |i: usize| (3 * i + 5) % 16);
        }
        for at in (48..64).step_by(4) {
            four!(3, 6, 10, 15, 21, a, b, c, d, m, at, |i: usize| (7 * i) % 16);
        }
        // Lane i of the mask is all ones where bit i of `active` is set.
        let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let mask = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(i32::from(active)), bits), bits);
        for (w, add) in [a, b, c, d].into_iter().enumerate() {
            let updated = _mm256_add_epi32(initial[w], add);
            let kept = _mm256_blendv_epi8(initial[w], updated, mask);
            // SAFETY: as for the loads.
            unsafe { _mm256_storeu_si256(row(w), kept) };
        }
    }
}
