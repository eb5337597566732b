//! The records the random source produces, in a file of their own so that the fair
//! benchmark (`tests/benches/fair.rs`) can compile this very code natively: its
//! native side then generates byte-identical payloads at the same cost, and the
//! comparison measures the host, not two different generators. Plain `std`, no
//! dependency, nothing of the guest SDK.

/// `{"seq":N,"text":"..."}`, padded with text to `size` bytes when it fits.
pub fn record(seq: u64, size: usize) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"seq\":";
    const MIDDLE: &[u8] = b",\"text\":\"";
    const TAIL: &[u8] = b"\"}";
    // The digits by hand: `format!` took a fifth of the host benchmark's time in wasm.
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = seq;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let digits = &digits[start..];
    let fixed = HEAD.len() + digits.len() + MIDDLE.len() + TAIL.len();
    let text_len = size.saturating_sub(fixed);
    let mut out = Vec::with_capacity(fixed + text_len);
    out.extend_from_slice(HEAD);
    out.extend_from_slice(digits);
    out.extend_from_slice(MIDDLE);
    // The text is a window onto a fixed pseudo-random text, from a place `seq`
    // picks, copied a slice at a time: cheap enough, even compiled to wasm, that a
    // benchmark of the host is not a benchmark of this loop. (Drawing every
    // character from a generator took four fifths of the host benchmark's time.)
    let mut at = (splitmix64(seq) % TEXT.len() as u64) as usize;
    let mut left = text_len;
    while left > 0 {
        let take = left.min(TEXT.len() - at);
        out.extend_from_slice(&TEXT[at..at + take]);
        left -= take;
        at = 0;
    }
    out.extend_from_slice(TAIL);
    out
}

/// 256 characters drawn from letters and digits, fixed at compile time.
const TEXT: [u8; 256] = {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut text = [0u8; 256];
    let mut state = 0xD1B5_4A32_D192_ED03u64;
    let mut i = 0;
    while i < text.len() {
        state = splitmix64(state);
        text[i] = ALPHABET[(state % ALPHABET.len() as u64) as usize];
        i += 1;
    }
    text
};

const fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
