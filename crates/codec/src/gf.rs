//! Scalar arithmetic in GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d).
//!
//! Owns the field: log / exp tables, the full 256 × 256 product table, and the
//! per-constant tables the SIMD engines consume (split-nibble shuffle tables
//! and GFNI affine matrices). Everything here is computed at compile time, so
//! no engine pays for table set-up at run time.
//!
//! Must not: know about codes, matrices or slices; every function here works
//! on single field elements.

/// The reduction polynomial, with the x^8 term.
pub const POLYNOMIAL: u16 = 0x11d;

/// The generator used for the log / exp tables (x, i.e. 2, is primitive for 0x11d).
pub const GENERATOR: u8 = 2;

const fn build_exp_log() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLYNOMIAL;
        }
        i += 1;
    }
    // Doubling the table lets `mul` index exp[log a + log b] without a modulo.
    let mut j = 255;
    while j < 512 {
        exp[j] = exp[j - 255];
        j += 1;
    }
    (exp, log)
}

const EXP_LOG: ([u8; 512], [u8; 256]) = build_exp_log();

/// exp[i] = g^i for i in 0..510 (doubled so sums of two logs need no reduction).
pub static EXP: [u8; 512] = EXP_LOG.0;
/// log[x] for x != 0; log[0] is meaningless and never read by the functions here.
pub static LOG: [u8; 256] = EXP_LOG.1;

const fn mul_slow(a: u8, b: u8) -> u8 {
    // Carry-less multiply then reduce: the definition, used to build tables
    // and as an independent check of the log / exp path in tests.
    let mut a = a as u16;
    let mut b = b;
    let mut product: u16 = 0;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        a <<= 1;
        if a & 0x100 != 0 {
            a ^= POLYNOMIAL;
        }
        b >>= 1;
    }
    product as u8
}

const fn build_mul_table() -> [[u8; 256]; 256] {
    let mut table = [[0u8; 256]; 256];
    let mut a = 0;
    while a < 256 {
        let mut b = 0;
        while b < 256 {
            table[a][b] = mul_slow(a as u8, b as u8);
            b += 1;
        }
        a += 1;
    }
    table
}

/// MUL_TABLE[c][x] = c · x. 64 KiB; the portable engine reads one 256-byte row per constant.
pub static MUL_TABLE: [[u8; 256]; 256] = build_mul_table();

/// c · x.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL_TABLE[a as usize][b as usize]
}

/// a + b (which is also a − b in characteristic 2).
#[inline]
pub fn add(a: u8, b: u8) -> u8 {
    a ^ b
}

/// Multiplicative inverse. Panics on zero: callers only invert pivots they checked.
#[inline]
pub fn inv(a: u8) -> u8 {
    assert!(a != 0, "zero has no inverse in GF(2^8)");
    EXP[255 - LOG[a as usize] as usize]
}

/// a / b. Panics when b is zero.
#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    assert!(b != 0, "division by zero in GF(2^8)");
    if a == 0 {
        return 0;
    }
    EXP[LOG[a as usize] as usize + 255 - LOG[b as usize] as usize]
}

/// a^e.
pub fn pow(a: u8, e: usize) -> u8 {
    if e == 0 {
        return 1;
    }
    if a == 0 {
        return 0;
    }
    EXP[(LOG[a as usize] as usize * e) % 255]
}

/// Split-nibble tables for multiplication by `c`: bytes 0..16 hold c · n for
/// the low nibble n, bytes 16..32 hold c · (n << 4) for the high nibble.
/// c · x = low[x & 15] ^ high[x >> 4]; this is what PSHUFB engines load.
pub const fn nibble_tables(c: u8) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut n = 0;
    while n < 16 {
        out[n] = mul_slow(c, n as u8);
        out[16 + n] = mul_slow(c, (n as u8) << 4);
        n += 1;
    }
    out
}

/// The 8 × 8 bit matrix, in the operand layout of GF2P8AFFINEQB, that maps x to c · x.
///
/// GF2P8AFFINEQB computes output bit i as the parity of (x AND byte 7−i of the
/// matrix). Multiplication by c is linear over GF(2): input bit j contributes
/// c · 2^j, so output bit i depends on input bit j when bit i of c · 2^j is set.
pub const fn affine_matrix(c: u8) -> u64 {
    let mut matrix: u64 = 0;
    let mut i = 0;
    while i < 8 {
        let mut row: u8 = 0;
        let mut j = 0;
        while j < 8 {
            if (mul_slow(c, 1u8 << j) >> i) & 1 != 0 {
                row |= 1 << j;
            }
            j += 1;
        }
        matrix |= (row as u64) << (8 * (7 - i));
        i += 1;
    }
    matrix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_exp_agree_with_definition() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let expected = mul_slow(a, b);
                assert_eq!(mul(a, b), expected);
                if a != 0 && b != 0 {
                    let via_logs = EXP[LOG[a as usize] as usize + LOG[b as usize] as usize];
                    assert_eq!(via_logs, expected, "{a} * {b}");
                }
            }
        }
    }

    #[test]
    fn inverse_and_division() {
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a)), 1);
            for b in 1..=255u8 {
                assert_eq!(mul(div(a, b), b), a);
            }
        }
        assert_eq!(div(0, 7), 0);
    }

    #[test]
    fn generator_is_primitive() {
        let mut seen = [false; 256];
        for (i, &x) in EXP.iter().take(255).enumerate() {
            assert!(!seen[x as usize], "generator repeats at {i}");
            seen[x as usize] = true;
        }
        assert_eq!(pow(GENERATOR, 255), 1);
    }

    #[test]
    fn nibble_tables_multiply() {
        for c in 0..=255u8 {
            let t = nibble_tables(c);
            for x in 0..=255u8 {
                assert_eq!(t[(x & 15) as usize] ^ t[16 + (x >> 4) as usize], mul(c, x));
            }
        }
    }

    /// A software model of GF2P8AFFINEQB with imm8 = 0, to check the matrix layout.
    fn affine_apply(matrix: u64, x: u8) -> u8 {
        let mut out = 0u8;
        for i in 0..8 {
            let row = (matrix >> (8 * (7 - i))) as u8;
            out |= (((row & x).count_ones() & 1) as u8) << i;
        }
        out
    }

    #[test]
    fn affine_matrices_multiply() {
        for c in 0..=255u8 {
            let m = affine_matrix(c);
            for x in 0..=255u8 {
                assert_eq!(affine_apply(m, x), mul(c, x), "c={c} x={x}");
            }
        }
    }
}
