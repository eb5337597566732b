//! `ferry log read`, `ferry log topics` and `ferry log skip`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ferry_config::Config;
use ferry_store::local_log::{LocalLog, skip_unreadable};
use ferry_store::state::StateDir;

pub fn read(path: &Path, stream: Option<&str>, topic: Option<&str>, from: u64, limit: Option<u64>) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let (stream, topic) = pick_topic(&config, stream, topic)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = LocalLog::read_with(&config.local_log.path, &stream, &topic, from, limit, |record| {
        writeln!(out, "{}", record.to_json())
    });
    match result {
        Ok(_) => {}
        // `ferry log read ... | head` closes the pipe early: that is not an error.
        Err(e) if e.to_string().contains("Broken pipe") => return Ok(ExitCode::SUCCESS),
        Err(e) => bail!("{e}"),
    }
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}

/// The stream and topic to read: as given, or the only one the config delivers to.
fn pick_topic(config: &Config, stream: Option<&str>, topic: Option<&str>) -> Result<(String, String)> {
    if let (Some(stream), Some(topic)) = (stream, topic) {
        return Ok((stream.to_string(), topic.to_string()));
    }
    let mut candidates: Vec<(String, String)> = config
        .sources
        .iter()
        .flat_map(|s| s.streams.iter())
        .filter(|s| stream.is_none_or(|want| s.stream == want) && topic.is_none_or(|want| s.topic == want))
        .map(|s| (s.stream.clone(), s.topic.clone()))
        .collect();
    candidates.sort();
    candidates.dedup();
    match candidates.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "{}: no source delivers to that stream/topic; name it with --stream and --topic",
            config.file.display()
        ),
        many => {
            let names: Vec<_> = many.iter().map(|(s, t)| format!("{s}/{t}")).collect();
            bail!("several topics to choose from ({}); name one with --stream and --topic", names.join(", "))
        }
    }
}

pub fn topics(path: &Path) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let topics = LocalLog::topics(&config.local_log.path)?;
    if topics.is_empty() {
        println!("the local log at {} is empty", config.local_log.path.display());
    }
    for topic in topics {
        println!("{}/{}: {} records", topic.stream, topic.topic, topic.records);
    }
    Ok(ExitCode::SUCCESS)
}

/// `ferry log skip`: sink `key`'s position in `stream`/`topic` moved past the record at
/// `offset`, which it cannot read.
pub fn skip(path: &Path, key: &str, (stream, topic): (&str, &str), offset: u64) -> Result<ExitCode> {
    let config = Config::load(path)?;
    let file = config.file.display();
    let Some(sink) = config.sink(key) else { bail!("{file}: no sink has the key `{key}`") };
    if config.iggy.is_some() {
        bail!(
            "{file}: sink `{key}` reads from Iggy, whose server keeps its offsets: there is no position to move here"
        );
    }
    if !sink.topics().any(|read| read == (stream, topic)) {
        bail!("{file}: sink `{key}` does not read {stream}/{topic}");
    }
    let states = StateDir::new(config.state_dir_of(sink));
    let state = states.open(key).map_err(|e| anyhow::anyhow!("cannot skip for sink `{key}`: {e}"))?;
    let skipped = skip_unreadable(&config.local_log.path, &state, key, &config.file, (stream, topic), offset)
        .map_err(|e| anyhow::anyhow!("cannot skip {stream}/{topic} offset {offset} for sink `{key}`: {e}"))?;
    println!(
        "{key}: skipped {stream}/{topic} offset {offset} ({}); its position there is now {} (generation {}); the \
         record stays in the log:",
        skipped.problem,
        offset + 1,
        skipped.generation
    );
    println!("{}", skipped.record.to_json());
    Ok(ExitCode::SUCCESS)
}
