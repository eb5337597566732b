//! The records the random source produces, in a file of their own so that the fair
//! benchmark (`tests/benches/fair.rs`) can compile this very code natively: its
//! native side then generates byte-identical payloads at the same cost, and the
//! comparison measures the host, not two different generators. Plain `std`, no
//! dependency, nothing of the guest SDK: a record is appended to anything that takes
//! bytes, the SDK's `Payload` in the guest and a `Vec` natively.

const HEAD: &[u8] = b"{\"seq\":";
const MIDDLE: &[u8] = b",\"text\":\"";
const TAIL: &[u8] = b"\"}";

/// `{"seq":N,"text":"..."}`, padded with text to `size` bytes when it fits, appended
/// to `out`: the payload of a message the guest writes straight into its batch, or a
/// vector.
pub fn write_record(seq: u64, size: usize, out: &mut impl for<'b> Extend<&'b u8>) {
    let layout = Layout::of(seq, size);
    out.extend(HEAD);
    out.extend(layout.digits());
    out.extend(MIDDLE);
    // The text is a window onto a fixed pseudo-random text, from a place `seq`
    // picks, copied a slice at a time: cheap enough, even compiled to wasm, that a
    // benchmark of the host is not a benchmark of this loop. (Drawing every
    // character from a generator took four fifths of the host benchmark's time.)
    let mut at = (splitmix64(seq) % TEXT.len() as u64) as usize;
    let mut left = layout.text;
    while left > 0 {
        let take = left.min(TEXT.len() - at);
        out.extend(&TEXT[at..at + take]);
        left -= take;
        at = 0;
    }
    out.extend(TAIL);
}

/// A record's parts: the digits of its `seq`, and how much text follows them.
struct Layout {
    digits: [u8; 20],
    start: usize,
    /// The bytes of text.
    text: usize,
}

impl Layout {
    fn of(seq: u64, size: usize) -> Layout {
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
        let fixed = HEAD.len() + (digits.len() - start) + MIDDLE.len() + TAIL.len();
        Layout { digits, start, text: size.saturating_sub(fixed) }
    }

    fn digits(&self) -> &[u8] {
        &self.digits[self.start..]
    }
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
