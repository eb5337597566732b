//! The records the random source produces, in a file of their own so that the fair
//! benchmark (`tests/benches/fair.rs`) can compile this very code natively: its
//! native side then generates byte-identical payloads at the same cost, and the
//! comparison measures the host, not two different generators. Plain `std`, no
//! dependency, nothing of the guest SDK.

/// `{"seq":N,"text":"..."}`, padded with text to `size` bytes when it fits.
pub fn record(seq: u64, size: usize) -> Vec<u8> {
    let head = format!("{{\"seq\":{seq},\"text\":\"");
    let tail = "\"}";
    let text_len = size.saturating_sub(head.len() + tail.len());
    let mut out = Vec::with_capacity(head.len() + text_len + tail.len());
    out.extend_from_slice(head.as_bytes());
    // Eight characters per step of the generator: cheap enough that a benchmark of the
    // host is not a benchmark of this loop.
    let mut state = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut left = text_len;
    while left > 0 {
        state = splitmix64(state);
        let take = left.min(8);
        out.extend(state.to_le_bytes()[..take].iter().map(|b| ALPHABET[*b as usize % ALPHABET.len()]));
        left -= take;
    }
    out.extend_from_slice(tail.as_bytes());
    out
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
