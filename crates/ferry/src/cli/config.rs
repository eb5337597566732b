//! `ferry config from-iggy CONFIG`: the Ferry config an Iggy connectors runtime file
//! (and the connector files of its `config_dir`, or its config server's answer) means, printed to move to. It is the
//! config `ferry run CONFIG` runs for that file, checked the same way.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ferry_config::{Config, MAX_CONFIG_BYTES, iggy_runtime};
use ferry_contract::files;

pub fn from_iggy(path: &Path) -> Result<ExitCode> {
    let text = files::read_regular_text(path, MAX_CONFIG_BYTES, "the config file", "the limit for a config file")
        .map_err(|e| anyhow::anyhow!("{}: cannot read the file: {}", path.display(), e.problem))?;
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let Some(ferry) = iggy_runtime::as_ferry(path, &text, &vars).map_err(anyhow::Error::msg)? else {
        bail!(
            "{}: not a config file of Iggy's connectors runtime (it has no [connectors] section); a Ferry config \
             needs no translation",
            path.display()
        );
    };
    // Checked as `ferry run` would check it (the same text, not the file read and,
    // for a config server, asked again), so that what is printed runs.
    Config::parse(path, &ferry, vars)?;
    println!(
        "# The Ferry config {} means (with the connectors of its config_dir, or those its config server \
         answered with now),\n# as `ferry run` runs it.\n\
         # Relative paths are relative to that file's directory: save this beside it.\n",
        path.display()
    );
    print!("{ferry}");
    Ok(ExitCode::SUCCESS)
}
