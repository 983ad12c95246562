//! `--config FILE.toml` and `--set key=value`: flags from a file or one at
//! a time. Each key is a long flag name of the subcommand, or a dotted
//! tuning key (`crown.lr_alpha`, or `lr_alpha` in a file's `[crown]`
//! table; `Options::set`); each entry becomes `--key=value` (a dotted one
//! `--tune=key=value`) right after the option that gave it, so flags given
//! later on the command line win (the commands let a flag repeat, the last
//! one counting).

use crate::InputError;
use clap::Command;
use std::ffi::OsString;

/// `args` with every `--config`/`--set` expanded into the flags they give.
pub fn expand(cmd: &Command, args: Vec<OsString>) -> Result<Vec<OsString>, InputError> {
    let Some(sub) = args.get(1).and_then(|s| s.to_str()).and_then(|s| cmd.find_subcommand(s)) else {
        return Ok(args);
    };
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let text = a.to_str().map(String::from);
        out.push(a);
        let Some(text) = text else { continue };
        let (opt, inline) = match text.split_once('=') {
            Some((o, v)) if o == "--config" || o == "--set" => (o.to_string(), Some(v.to_string())),
            _ => (text.clone(), None),
        };
        if opt != "--config" && opt != "--set" {
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => match it.peek().and_then(|v| v.to_str()) {
                Some(v) => {
                    let v = v.to_string();
                    out.push(it.next().expect("peeked"));
                    v
                }
                None => continue, // clap reports the missing value
            },
        };
        let pairs = if opt == "--config" { from_file(&value)? } else { vec![from_set(&value)?] };
        for (key, v, source) in pairs {
            out.extend(flag(sub, &key, v, &source)?);
        }
    }
    Ok(out)
}

/// A key, its value as flag text (`None` for `false`: the flag is left
/// out; `""` for `true`), and where it came from.
type Entry = (String, Option<String>, String);

fn from_file(path: &str) -> Result<Vec<Entry>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| InputError(format!("{path}: cannot read: {e}")))?;
    let table: toml::Table =
        text.parse().map_err(|e: toml::de::Error| InputError(format!("{path}: not TOML: {}", e.message())))?;
    let mut out = Vec::new();
    entries(path, "", table, &mut out)?;
    Ok(out)
}

/// The entries of `table`, its tables' keys dotted under `prefix`.
fn entries(path: &str, prefix: &str, table: toml::Table, out: &mut Vec<Entry>) -> Result<(), InputError> {
    for (key, v) in table {
        let key = format!("{prefix}{key}");
        let text = match v {
            toml::Value::Table(t) => {
                entries(path, &format!("{key}."), t, out)?;
                continue;
            }
            toml::Value::String(s) => Some(s),
            toml::Value::Integer(i) => Some(i.to_string()),
            toml::Value::Float(f) => Some(f.to_string()),
            toml::Value::Boolean(true) => Some(String::new()),
            toml::Value::Boolean(false) => None,
            toml::Value::Array(a) => Some(
                a.iter()
                    .map(|x| match x {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            other => return Err(InputError(format!("{path}: {key}: a {} is not a flag value", other.type_str()))),
        };
        out.push((key, text, path.to_string()));
    }
    Ok(())
}

fn from_set(kv: &str) -> Result<Entry, InputError> {
    let (k, v) = kv.split_once('=').ok_or_else(|| InputError(format!("--set {kv}: expected key=value")))?;
    let v = match v {
        "true" => Some(String::new()),
        "false" => None,
        v => Some(v.to_string()),
    };
    Ok((k.trim().to_string(), v, format!("--set {kv}")))
}

/// The flag for `key`, checked against the subcommand's flags (a dotted
/// key against the tuning keys, with its value).
fn flag(sub: &Command, key: &str, value: Option<String>, source: &str) -> Result<Option<OsString>, InputError> {
    if key.contains('.') && sub.get_arguments().any(|a| a.get_long() == Some("tune")) {
        let v = match value {
            Some(v) if v.is_empty() => "true".to_string(),
            Some(v) => v,
            None => "false".to_string(),
        };
        let kv = format!("{key}={v}");
        crate::args::tuning(&kv).map_err(|e| {
            let hint = if e.starts_with("unknown key") { " (the tuning keys are listed in docs/cli.md)" } else { "" };
            InputError(format!("{source}: {e}{hint}"))
        })?;
        return Ok(Some(format!("--tune={kv}").into()));
    }
    let known = sub.get_arguments().find(|a| a.get_long() == Some(key) && !["config", "set", "tune"].contains(&key));
    let Some(arg) = known else {
        return Err(InputError(format!(
            "{source}: unknown key '{key}' (keys are the long flag names of `polycert {} --help`)",
            sub.get_name()
        )));
    };
    let takes_value = arg.get_action().takes_values();
    Ok(match (value, takes_value) {
        (None, _) => None,
        (Some(v), false) if v.is_empty() => Some(format!("--{key}").into()),
        (Some(v), false) => {
            return Err(InputError(format!("{source}: {key} is a switch: give true or false, not '{v}'")));
        }
        (Some(v), true) => Some(format!("--{key}={v}").into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cmd() -> Command {
        Command::new("polycert").subcommand(
            Command::new("verify")
                .arg(Arg::new("steps").long("attack-steps"))
                .arg(Arg::new("no_alpha").long("no-alpha").action(ArgAction::SetTrue))
                .arg(Arg::new("config").long("config"))
                .arg(Arg::new("set").long("set").action(ArgAction::Append))
                .arg(Arg::new("tune").long("tune").action(ArgAction::Append)),
        )
    }

    fn run(args: &[&str]) -> Result<Vec<String>, InputError> {
        let args = args.iter().map(OsString::from).collect();
        Ok(expand(&cmd(), args)?.into_iter().map(|s| s.into_string().unwrap()).collect())
    }

    #[test]
    fn set_and_config_become_flags_in_place() {
        let path = std::env::temp_dir().join(format!("polycert-config-{}.toml", std::process::id()));
        std::fs::write(&path, "attack-steps = 50\nno-alpha = true\n").unwrap();
        let p = path.to_str().unwrap();
        assert_eq!(
            run(&["polycert", "verify", "--config", p, "--set", "attack-steps=7"]).unwrap(),
            [
                "polycert",
                "verify",
                "--config",
                p,
                "--attack-steps=50",
                "--no-alpha",
                "--set",
                "attack-steps=7",
                "--attack-steps=7"
            ]
        );
        std::fs::write(&path, "no-alpha = false\n").unwrap();
        assert_eq!(run(&["polycert", "verify", &format!("--config={p}")]).unwrap().len(), 3);
        std::fs::write(&path, "attack_steps = 5\n").unwrap();
        assert!(run(&["polycert", "verify", "--config", p]).unwrap_err().0.contains("unknown key 'attack_steps'"));
        std::fs::write(&path, "attack-steps = [").unwrap();
        assert!(run(&["polycert", "verify", "--config", p]).unwrap_err().0.contains("not TOML"));
        std::fs::remove_file(&path).ok();
        assert!(run(&["polycert", "verify", "--set", "no-alpha=3"]).unwrap_err().0.contains("is a switch"));
        assert!(run(&["polycert", "verify", "--set", "steps"]).unwrap_err().0.contains("expected key=value"));
        assert!(run(&["polycert", "verify", "--set", "config=x"]).is_err());
    }

    #[test]
    fn dotted_keys_become_checked_tuning_flags() {
        let path = std::env::temp_dir().join(format!("polycert-dotted-{}.toml", std::process::id()));
        std::fs::write(&path, "attack-steps = 3\n[crown]\nlr_alpha = 0.2\n[search.stabilize]\nshare = 0.3\n").unwrap();
        let p = path.to_str().unwrap();
        let got = run(&["polycert", "verify", "--config", p, "--set", "search.gate.warmup=7"]).unwrap();
        let want = ["--attack-steps=3", "--tune=crown.lr_alpha=0.2", "--tune=search.stabilize.share=0.3"];
        assert_eq!(got[4..7], want);
        assert_eq!(got[7..], ["--set", "search.gate.warmup=7", "--tune=search.gate.warmup=7"]);
        std::fs::write(&path, "[search.stabilize]\nshare = 1.5\n").unwrap();
        let e = run(&["polycert", "verify", "--config", p]).unwrap_err().0;
        assert!(e.ends_with("search.stabilize.share: expected a number in [0, 1], not '1.5'"), "{e}");
        std::fs::write(&path, "[crown]\nlr = [1]\n").unwrap();
        assert!(run(&["polycert", "verify", "--config", p]).unwrap_err().0.contains("unknown key 'crown.lr'"));
        std::fs::remove_file(&path).ok();
        let e = run(&["polycert", "verify", "--set", "crown.steps=true"]).unwrap_err().0;
        assert_eq!(e, "--set crown.steps=true: crown.steps: expected a whole number, not 'true'");
    }
}
