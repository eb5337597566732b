//! The README's "Command line" says what `ferry --help` says: every command `ferry`
//! has is listed there, and every option and value a README line gives is one its
//! command's `--help` knows. A user reading either learns the same tool.

use crate::process::ferry;

/// The lines of the README's command block that start a command (`ferry new ...`).
fn readme_commands() -> Vec<String> {
    let readme = include_str!("../../README.md");
    let section = readme.split("\n## Command line\n").nth(1).expect("the README has a Command line section");
    let block = section.split("```").nth(1).expect("a code block in the Command line section");
    block
        .lines()
        .filter(|l| l.starts_with("ferry "))
        .map(|l| l.split("  ").next().unwrap().trim().to_string())
        .collect()
}

/// The words naming the command in `line` (`ferry state show CONFIG` → `state show`).
fn command_words(line: &str) -> Vec<&str> {
    line.split_whitespace().skip(1).take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-')).collect()
}

/// The commands a `--help` text lists under `Commands:` (none when it has no such list).
fn commands_in(help: &str) -> Option<Vec<&str>> {
    let list = help.split("Commands:").nth(1)?;
    let commands = list
        .lines()
        // The rest of the `Commands:` line.
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A description wrapped onto the next line is indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    Some(commands)
}

fn help(words: &[&str]) -> String {
    let mut args = words.to_vec();
    args.push("--help");
    let out = ferry(&args);
    assert!(out.status.success(), "ferry {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_readme_lists_every_command_and_each_option_as_the_help_has_it() {
    let lines = readme_commands();
    assert!(lines.len() >= 10, "{lines:#?}");
    let listed: Vec<Vec<&str>> = lines.iter().map(|l| command_words(l)).collect();

    // Every command of `ferry --help`, and every subcommand of one with subcommands.
    let top = help(&[]);
    let commands = commands_in(&top).expect("ferry --help lists its commands");
    assert!(commands.contains(&"new") && commands.contains(&"run"), "{top}");
    for command in &commands {
        assert!(listed.iter().any(|words| words.first() == Some(command)), "`ferry {command}` is not in the README");
        let text = help(&[command]);
        for sub in commands_in(&text).unwrap_or_default() {
            assert!(
                listed.iter().any(|words| words[..] == [*command, sub]),
                "`ferry {command} {sub}` is not in the README"
            );
        }
    }

    for (line, words) in lines.iter().zip(&listed) {
        let text = help(words);
        for option in line.split(|c: char| c.is_whitespace() || "[]|".contains(c)).filter(|w| w.starts_with("--")) {
            assert!(text.contains(option), "{line}: `ferry {} --help` knows no {option}:\n{text}", words.join(" "));
        }
        // Values given as `--name a|b|c` are the ones the help lists.
        for (at, _) in line.match_indices("--") {
            let mut parts = line[at..].split_whitespace();
            let (Some(option), Some(values)) = (parts.next(), parts.next()) else { continue };
            let values = values.trim_matches(|c| c == '[' || c == ']');
            // (`--once | --iterations N` is a choice of options, not of values.)
            let is_value = |v: &str| !v.is_empty() && !v.starts_with('-');
            if !values.contains('|')
                || !values.split('|').all(is_value)
                || values.chars().any(|c| c.is_ascii_uppercase())
            {
                continue;
            }
            let listed = values.split('|').collect::<Vec<_>>().join(", ");
            assert!(
                text.contains(&format!("[possible values: {listed}]")),
                "{line}: {option} takes {listed} in the README, but the help says:\n{text}"
            );
        }
    }
}
