//! The names of the sink's files: numbered data files whose order `ls` shows, and the
//! checkpoint that lets recovery start at the newest one.
//!
//! With `file = "sink.jsonl"` the data files are `sink.000001.jsonl`,
//! `sink.000002.jsonl`, ... (the number goes before the extension, zero-padded to six
//! digits so names sort in order; past 999999 it simply grows), and the checkpoint is
//! `sink.offsets.json`. A name without an extension, `out`, gives `out.000001`, ...
//! and `out.offsets.json`.

use ferry_guest::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    stem: String,
    /// The extension, with its dot, or empty.
    ext: String,
}

impl Naming {
    /// The naming for the operator's `file`, which must be a plain file name.
    pub fn new(file: &str) -> Result<Naming, Error> {
        if file.is_empty() || file == "." || file == ".." || file.contains(['/', '\\']) {
            return Err(Error::msg(format!(
                "plugin_config.file must be a plain file name (the directory is `directory`), not {file:?}"
            )));
        }
        let (stem, ext) = match file.rfind('.') {
            Some(dot) if dot > 0 => (&file[..dot], &file[dot..]),
            _ => (file, ""),
        };
        Ok(Naming { stem: stem.to_string(), ext: ext.to_string() })
    }

    /// The name of data file number `n`.
    pub fn data(&self, n: u64) -> String {
        format!("{}.{n:06}{}", self.stem, self.ext)
    }

    /// The number of the data file called `name`, if it is one of ours.
    pub fn parse(&self, name: &str) -> Option<u64> {
        let digits = name.strip_prefix(&self.stem)?.strip_prefix('.')?.strip_suffix(self.ext.as_str())?;
        if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// The name of the checkpoint.
    pub fn checkpoint(&self) -> String {
        format!("{}.offsets.json", self.stem)
    }

    /// Where the next checkpoint is written before it replaces the old one.
    pub fn checkpoint_tmp(&self) -> String {
        format!("{}.offsets.json.tmp", self.stem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_go_before_the_extension_and_sort_as_names() {
        let naming = Naming::new("sink.jsonl").unwrap();
        assert_eq!(naming.data(1), "sink.000001.jsonl");
        assert_eq!(naming.data(1_234_567), "sink.1234567.jsonl");
        let mut names: Vec<String> = [10, 2, 1, 999_999].iter().map(|n| naming.data(*n)).collect();
        names.sort();
        assert_eq!(names, ["sink.000001.jsonl", "sink.000002.jsonl", "sink.000010.jsonl", "sink.999999.jsonl"]);
        assert_eq!(naming.checkpoint(), "sink.offsets.json");
    }

    #[test]
    fn only_our_own_names_parse() {
        let naming = Naming::new("sink.jsonl").unwrap();
        for n in [1, 42, 999_999, 1_000_000] {
            assert_eq!(naming.parse(&naming.data(n)), Some(n));
        }
        for other in [
            "sink.jsonl",
            "sink.offsets.json",
            "sink.offsets.json.tmp",
            "sink.12.jsonl",
            "sink.00000x.jsonl",
            "sink.000001.json",
            "other.000001.jsonl",
            "sink.000001.jsonl.bak",
        ] {
            assert_eq!(naming.parse(other), None, "{other}");
        }
    }

    #[test]
    fn a_name_without_extension_is_numbered_at_the_end() {
        let naming = Naming::new("out").unwrap();
        assert_eq!(naming.data(3), "out.000003");
        assert_eq!(naming.parse("out.000003"), Some(3));
        assert_eq!(naming.checkpoint(), "out.offsets.json");
        let hidden = Naming::new(".log").unwrap();
        assert_eq!(hidden.data(1), ".log.000001");
    }

    #[test]
    fn a_path_is_not_a_file_name() {
        for bad in ["", ".", "..", "a/b.jsonl", "/etc/passwd", "..\\x"] {
            let error = Naming::new(bad).unwrap_err();
            assert!(error.message().contains("plugin_config.file"), "{error}");
        }
    }
}
