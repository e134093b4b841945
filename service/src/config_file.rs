//! A server's configuration file: `--config FILE` (TOML) sets any of its flags.
//!
//! The clap derive structs stay the one definition of every setting; this module reads
//! everything it needs from the built `clap::Command`. A key is a flag's long name
//! (`cache-ttl-s = 3600`); the flags under the [`TESTING`] help heading go in the file's
//! `[testing]` table. Loading checks each key against the command's arguments (an
//! unknown one is refused with the nearest valid key, by Levenshtein distance) and each
//! value with that argument's own value parser, then installs the file's values as the
//! arguments' defaults and parses the command line again. Clap takes a flag over its
//! `COCKTAIL_*` variable over its default, so flags and variables override the file
//! without any precedence code here, and every range and choice is checked in one place.
//!
//! The same definitions print the effective configuration (`--print-config`, TOML that
//! `--config` reads back) and the reference page (`--print-config-reference`,
//! docs/configuration.md).

use std::any::TypeId;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::builder::Resettable;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};
use cocktail_common::redact::UrlWithCredentials;

/// The help heading of the flags that exist for tests and the emulated provider; the
/// file keeps them in its [`TESTING_TABLE`].
pub const TESTING: &str = "Testing and emulation";
/// The file's table for the flags under [`TESTING`].
pub const TESTING_TABLE: &str = "testing";

/// The flags of the configuration file itself; flatten into a server's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Configuration")]
pub struct ConfigArgs {
    /// A TOML file of settings: each key is a flag's long name (`port = 8080`), and the
    /// flags under "Testing and emulation" go in its `[testing]` table. Flags and
    /// COCKTAIL_* variables override it (docs/configuration.md).
    #[arg(long, env = "COCKTAIL_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (TOML that `--config` reads; credentials in
    /// URLs redacted) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Print the reference of every setting (Markdown: docs/configuration.md) and exit.
    #[arg(long)]
    pub print_config_reference: bool,
}

/// Arguments that are not settings: the file's own flags and clap's.
const NOT_SETTINGS: [&str; 5] = [
    "config",
    "print_config",
    "print_config_reference",
    "help",
    "version",
];

/// Why the command line and the configuration file could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A bad flag or variable, or `--help`/`--version`: `clap::Error::exit` reports it.
    #[error(transparent)]
    Clap(#[from] clap::Error),
    #[error("reading the configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Syntax {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{path}: unknown key `{key}`; {hint}")]
    UnknownKey {
        path: PathBuf,
        key: String,
        hint: String,
    },
    #[error("{path}: `{key}` = {value}: {reason}; expected {expected}")]
    BadValue {
        path: PathBuf,
        key: String,
        value: String,
        reason: String,
        expected: String,
    },
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed<T> {
    /// Run with these settings.
    Run(T),
    /// Print this (`--print-config`, `--print-config-reference`) and exit.
    Print(String),
}

/// Parses `argv` (program name first) over the file `--config` or `COCKTAIL_CONFIG`
/// names, if any. `intro` heads the reference page.
pub fn parse<T: CommandFactory + FromArgMatches>(
    argv: impl IntoIterator<Item = impl Into<OsString>>,
    intro: &str,
) -> Result<Parsed<T>, ConfigError> {
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let mut command = T::command();
    // A first pass finds the file (and answers `--help`, `--version` and bad flags).
    let first = command.clone().try_get_matches_from(&argv)?;
    if is_set(&first, "print_config_reference") {
        return Ok(Parsed::Print(reference(&command, intro)));
    }
    if let Ok(Some(path)) = first.try_get_one::<PathBuf>("config") {
        command = ConfigFile::load(path)?.install(command)?;
    }
    let matches = command.clone().try_get_matches_from(&argv)?;
    if is_set(&matches, "print_config") {
        // In the definitions' order: `install` moves the arguments it changes to the end.
        return Ok(Parsed::Print(effective(&T::command(), &matches)));
    }
    Ok(Parsed::Run(T::from_arg_matches(&matches)?))
}

/// A setting in the file: its table (`None` at the top level), key and value.
type Entry<'a> = (Option<&'a str>, &'a str, &'a toml::Value);

/// Whether the switch `id` is on (false for a command without it).
fn is_set(matches: &ArgMatches, id: &str) -> bool {
    matches!(matches.try_get_one::<bool>(id), Ok(Some(true)))
}

/// A configuration file, read and parsed as TOML but not yet checked against a command.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    table: toml::Table,
}

impl ConfigFile {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// `text` as if read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let table = text
            .parse::<toml::Table>()
            .map_err(|source| ConfigError::Syntax {
                path: path.to_owned(),
                source: Box::new(source),
            })?;
        Ok(Self {
            path: path.to_owned(),
            table,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value the file gives `key` (a long flag name), at the top level or in its
    /// `[testing]` table.
    pub fn get(&self, key: &str) -> Option<&toml::Value> {
        match self.table.get(key) {
            Some(toml::Value::Table(_)) => None,
            Some(value) => Some(value),
            None => self
                .table
                .get(TESTING_TABLE)
                .and_then(toml::Value::as_table)
                .and_then(|testing| testing.get(key)),
        }
    }

    /// Checks every key and value against `command`'s arguments and makes the values
    /// their defaults.
    pub fn install(&self, mut command: Command) -> Result<Command, ConfigError> {
        // Inspect a built copy (flags' implied settings filled in); change the unbuilt
        // one, which clap builds again when it parses.
        let mut built = command.clone();
        built.build();
        let mut defaults = Vec::new();
        for (table, key, value) in self.entries()? {
            let arg = self.setting(&built, table, key)?;
            defaults.push((arg.get_id().clone(), self.values(&built, arg, key, value)?));
        }
        for (id, values) in defaults {
            command = command.mut_arg(id, |arg| arg.default_values(values));
        }
        Ok(command)
    }

    /// Every `(table, key, value)`; `table` is `None` at the top level.
    fn entries(&self) -> Result<Vec<Entry<'_>>, ConfigError> {
        let mut entries = Vec::new();
        for (key, value) in &self.table {
            match value {
                toml::Value::Table(inner) if key == TESTING_TABLE => entries.extend(
                    inner
                        .iter()
                        .map(|(k, v)| (Some(TESTING_TABLE), k.as_str(), v)),
                ),
                toml::Value::Table(_) => {
                    return Err(ConfigError::UnknownKey {
                        path: self.path.clone(),
                        key: format!("[{key}]"),
                        hint: format!(
                            "the only table is [{TESTING_TABLE}]; every other key goes at the top level"
                        ),
                    });
                }
                _ => entries.push((None, key.as_str(), value)),
            }
        }
        Ok(entries)
    }

    /// The argument `key` in `table` sets.
    fn setting<'c>(
        &self,
        command: &'c Command,
        table: Option<&str>,
        key: &str,
    ) -> Result<&'c Arg, ConfigError> {
        let unknown = |hint: String| ConfigError::UnknownKey {
            path: self.path.clone(),
            key: qualified(table, key),
            hint,
        };
        let settings = || command.get_arguments().filter(|arg| is_setting(arg));
        let Some(arg) = settings().find(|arg| arg.get_long() == Some(key)) else {
            let nearest = settings()
                .filter_map(|arg| arg.get_long().map(|long| (long, arg)))
                .min_by_key(|(long, _)| strsim::levenshtein(key, long));
            return Err(unknown(match nearest {
                Some((long, arg)) => format!(
                    "the nearest valid key is `{}`",
                    qualified(table_of(arg), long)
                ),
                None => "this command takes no settings".to_owned(),
            }));
        };
        match table_of(arg) {
            found if found == table => Ok(arg),
            Some(table) => Err(unknown(format!("it goes in the [{table}] table"))),
            None => Err(unknown(
                "it goes at the top level, before any [table]".to_owned(),
            )),
        }
    }

    /// The flag values `value` stands for, checked with `arg`'s own parser.
    fn values(
        &self,
        command: &Command,
        arg: &Arg,
        key: &str,
        value: &toml::Value,
    ) -> Result<Vec<String>, ConfigError> {
        let bad = |reason: &str| ConfigError::BadValue {
            path: self.path.clone(),
            key: key.to_owned(),
            value: value.to_string(),
            reason: reason.to_owned(),
            expected: expected_form(arg),
        };
        let scalar = |value: &toml::Value| match value {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            toml::Value::Datetime(_) | toml::Value::Array(_) | toml::Value::Table(_) => {
                Err(bad("not a string, number or boolean"))
            }
        };
        if is_switch(arg) {
            return match value {
                toml::Value::Boolean(b) => Ok(vec![b.to_string()]),
                _ => Err(bad("not a boolean")),
            };
        }
        let mut values = match value {
            toml::Value::Array(items) if is_list(arg) => {
                items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?
            }
            toml::Value::Array(_) => return Err(bad("a list, where one value is taken")),
            value => vec![scalar(value)?],
        };
        if let Some(delimiter) = arg.get_value_delimiter() {
            values = values
                .iter()
                .flat_map(|v| v.split(delimiter).map(str::to_owned))
                .collect();
        }
        // The argument's own parser on a command of that argument alone: clap keeps
        // `ValueParser::parse_ref` to itself. Without its variable (which would be
        // checked instead) and the arguments it requires (absent here).
        let alone = arg
            .clone()
            .env(Resettable::Reset)
            .requires(Resettable::Reset);
        let long = arg.get_long().unwrap_or(key);
        let flags = values.iter().map(|v| format!("--{long}={v}"));
        Command::new(command.get_name().to_owned())
            .no_binary_name(true)
            .arg(alone)
            .try_get_matches_from(flags)
            .map_err(|error| {
                let reason = match std::error::Error::source(&error) {
                    Some(source) => source.to_string(),
                    None if error.kind() == clap::error::ErrorKind::InvalidValue => {
                        "not one of the choices".to_owned()
                    }
                    None => error
                        .render()
                        .to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches("error: ")
                        .to_owned(),
                };
                bad(&reason)
            })?;
        Ok(values)
    }
}

/// The arguments a file may set.
fn is_setting(arg: &Arg) -> bool {
    arg.get_long().is_some() && !NOT_SETTINGS.contains(&arg.get_id().as_str())
}

/// The file's table for `arg`: `None` at the top level.
fn table_of(arg: &Arg) -> Option<&'static str> {
    (arg.get_help_heading() == Some(TESTING)).then_some(TESTING_TABLE)
}

fn qualified(table: Option<&str>, key: &str) -> String {
    match table {
        Some(table) => format!("{table}.{key}"),
        None => key.to_owned(),
    }
}

/// An on/off flag (`--on-demand`): `true` or `false` in the file.
fn is_switch(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse)
}

/// A flag that takes a list: an array in the file.
fn is_list(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Append)
}

/// What an argument's values are, as the file writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Boolean,
    Integer,
    Number,
    Secret,
    Text,
}

fn form(arg: &Arg) -> Form {
    let id = arg.get_value_parser().type_id();
    let integers = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ];
    if is_switch(arg) || id == TypeId::of::<bool>() {
        Form::Boolean
    } else if integers.iter().any(|t| id == *t) {
        Form::Integer
    } else if id == TypeId::of::<f64>() || id == TypeId::of::<f32>() {
        Form::Number
    } else if id == TypeId::of::<UrlWithCredentials>() {
        Form::Secret
    } else {
        Form::Text
    }
}

/// The form a value of `arg` takes, for messages and the reference page.
fn expected_form(arg: &Arg) -> String {
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    let one = if !choices.is_empty() {
        format!("one of {}", choices.join(", "))
    } else {
        match form(arg) {
            Form::Boolean => "true or false".to_owned(),
            Form::Integer => "a whole number".to_owned(),
            Form::Number => "a number".to_owned(),
            Form::Secret => {
                "a URL (a string; its credentials are redacted in print-outs)".to_owned()
            }
            Form::Text if arg.get_value_parser().type_id() == TypeId::of::<PathBuf>() => {
                "a path (a string)".to_owned()
            }
            Form::Text => "a string".to_owned(),
        }
    };
    if is_list(arg) {
        format!("a list (an array), each value {one}")
    } else {
        one
    }
}

/// A raw value as TOML: typed by the argument's parser, credentials redacted.
fn typed(arg: &Arg, raw: &str) -> toml::Value {
    let text = || toml::Value::String(raw.to_owned());
    match form(arg) {
        Form::Boolean => raw.parse().map_or_else(|_| text(), toml::Value::Boolean),
        Form::Integer => raw.parse().map_or_else(|_| text(), toml::Value::Integer),
        Form::Number => raw
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map_or_else(text, toml::Value::Float),
        Form::Secret => toml::Value::String(UrlWithCredentials::new(raw).redacted()),
        Form::Text => text(),
    }
}

/// The settings `matches` holds, as a configuration file: the top-level keys, then the
/// `[testing]` table; each help heading a comment, unset settings commented out.
pub fn effective(command: &Command, matches: &ArgMatches) -> String {
    let mut command = command.clone();
    command.build();
    let mut out = format!(
        "# The effective configuration of {} (credentials in URLs redacted).\n",
        command.get_name()
    );
    for table in [None, Some(TESTING_TABLE)] {
        if let Some(table) = table {
            let _ = write!(out, "\n[{table}]\n");
        }
        let mut heading = None;
        for arg in command
            .get_arguments()
            .filter(|arg| is_setting(arg) && table_of(arg) == table)
        {
            if table.is_none() && arg.get_help_heading() != heading {
                heading = arg.get_help_heading();
                let _ = write!(out, "\n# {}\n", heading.unwrap_or("General"));
            }
            let key = arg.get_long().unwrap_or_default();
            let raw: Vec<String> = matches
                .get_raw(arg.get_id().as_str())
                .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            if raw.is_empty() && !is_list(arg) {
                let _ = writeln!(out, "# {key} = (unset)");
                continue;
            }
            let value = if is_list(arg) {
                toml::Value::Array(raw.iter().map(|v| typed(arg, v)).collect())
            } else {
                typed(arg, &raw[0])
            };
            let _ = writeln!(out, "{key} = {value}");
        }
    }
    out
}

/// The reference page of every setting: `intro`, then a table per help heading with
/// each key, its form, default, variable and meaning.
pub fn reference(command: &Command, intro: &str) -> String {
    let mut command = command.clone();
    command.build();
    let mut out = intro.trim_end().to_owned();
    out.push('\n');
    let settings: Vec<&Arg> = command.get_arguments().filter(|a| is_setting(a)).collect();
    let mut headings: Vec<Option<&str>> = Vec::new();
    for arg in &settings {
        if !headings.contains(&arg.get_help_heading()) {
            headings.push(arg.get_help_heading());
        }
    }
    // The [testing] table last, as `--print-config` writes it.
    headings.sort_by_key(|heading| *heading == Some(TESTING));
    for heading in headings {
        let title = heading.unwrap_or("General");
        let _ = match heading {
            Some(TESTING) => write!(out, "\n## {title} (the `[{TESTING_TABLE}]` table)\n\n"),
            _ => write!(out, "\n## {title}\n\n"),
        };
        out.push_str("| Key | Value | Default | Variable | Meaning |\n|---|---|---|---|---|\n");
        for arg in settings.iter().filter(|a| a.get_help_heading() == heading) {
            let default: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = if default.is_empty() {
                "unset".to_owned()
            } else {
                format!("`{}`", default.join(","))
            };
            let variable = arg
                .get_env()
                .map_or_else(String::new, |v| format!("`{}`", v.to_string_lossy()));
            let meaning = arg
                .get_long_help()
                .or_else(|| arg.get_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| `{}` | {} | {default} | {variable} | {} |",
                arg.get_long().unwrap_or_default(),
                cell(&expected_form(arg)),
                cell(&meaning),
            );
        }
    }
    out
}

/// Text fit for a Markdown table cell: one line, no bare `|`.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// A small server's flags, shaped like the master's.
    #[derive(Debug, Parser)]
    #[command(name = "toy")]
    struct Toy {
        /// Port to bind.
        #[arg(long, env = "TOY_PORT_UNSET_IN_TESTS", default_value_t = 8080)]
        port: u16,
        /// Seconds a cached selection lives.
        #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
        cache_ttl_s: u64,
        /// A share.
        #[arg(long, default_value_t = 0.5)]
        share: f64,
        /// The vote.
        #[arg(long, value_enum, default_value_t = Vote::Majority)]
        vote: Vote,
        /// Buy on-demand only.
        #[arg(long)]
        on_demand: bool,
        /// Models (comma-separated).
        #[arg(long, value_delimiter = ',')]
        models: Vec<String>,
        /// A cache.
        #[arg(long)]
        redis_url: Option<UrlWithCredentials>,
        /// The seed.
        #[arg(long, default_value_t = 1)]
        #[arg(help_heading = TESTING)]
        seed: u64,
        #[command(flatten)]
        config: ConfigArgs,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
    enum Vote {
        Majority,
        Weighted,
    }

    fn with_file(text: &str, flags: &[&str]) -> Result<Parsed<Toy>, ConfigError> {
        let path = Path::new("toy.toml");
        let command = ConfigFile::parse(path, text)?.install(Toy::command())?;
        let argv = std::iter::once("toy").chain(flags.iter().copied());
        let matches = command.clone().try_get_matches_from(argv)?;
        if matches.get_flag("print_config") {
            return Ok(Parsed::Print(effective(&Toy::command(), &matches)));
        }
        Ok(Parsed::Run(Toy::from_arg_matches(&matches)?))
    }

    fn run(text: &str, flags: &[&str]) -> Toy {
        match with_file(text, flags).unwrap() {
            Parsed::Run(toy) => toy,
            Parsed::Print(text) => panic!("printed {text}"),
        }
    }

    fn error(text: &str) -> String {
        with_file(text, &[]).unwrap_err().to_string()
    }

    const FILE: &str = r#"
        port = 9000
        cache-ttl-s = 60
        share = 1
        vote = "weighted"
        on-demand = true
        models = ["a", "b"]
        [testing]
        seed = 7
    "#;

    #[test]
    fn the_file_sets_every_kind_of_flag_and_flags_override_it() {
        let toy = run(FILE, &[]);
        assert_eq!(
            (
                toy.port,
                toy.cache_ttl_s,
                toy.share,
                toy.vote,
                toy.on_demand
            ),
            (9000, 60, 1.0, Vote::Weighted, true)
        );
        assert_eq!((toy.models, toy.seed), (vec!["a".into(), "b".into()], 7));
        let toy = run(FILE, &["--port", "9100", "--models", "c", "--seed=8"]);
        assert_eq!(
            (toy.port, toy.models, toy.seed),
            (9100, vec!["c".into()], 8)
        );
        // Unset keys keep their defaults; a comma-separated string is a list, as in a flag.
        let toy = run("models = \"x,y\"", &[]);
        assert_eq!((toy.port, toy.models), (8080, vec!["x".into(), "y".into()]));
    }

    #[test]
    fn an_unknown_key_is_named_with_the_nearest_valid_one() {
        let text = error("cache-tl-s = 5");
        assert!(text.contains("unknown key `cache-tl-s`"), "{text}");
        assert!(
            text.contains("nearest valid key is `cache-ttl-s`"),
            "{text}"
        );
        assert!(text.starts_with("toy.toml: "), "{text}");
        let text = error("[testing]\nsead = 5");
        assert!(text.contains("`testing.sead`"), "{text}");
        assert!(text.contains("`testing.seed`"), "{text}");
        let text = error("seed = 5");
        assert!(
            text.contains("`seed`") && text.contains("[testing] table"),
            "{text}"
        );
        let text = error("[testing]\nport = 5");
        assert!(
            text.contains("`testing.port`") && text.contains("top level"),
            "{text}"
        );
        let text = error("[resources]\nport = 5");
        assert!(text.contains("`[resources]`"), "{text}");
        // The file's own flags are not settings.
        let text = error("config = \"other.toml\"");
        assert!(text.contains("unknown key `config`"), "{text}");
    }

    #[test]
    fn a_bad_value_is_named_with_the_form_expected() {
        for (file, key, expected) in [
            ("cache-ttl-s = 0", "`cache-ttl-s` = 0", "a whole number"),
            ("port = \"eighty\"", "`port` = \"eighty\"", "a whole number"),
            ("port = 70000", "`port` = 70000", "a whole number"),
            ("share = \"half\"", "`share` = \"half\"", "a number"),
            (
                "vote = \"clipper\"",
                "`vote` = \"clipper\": not one of the choices",
                "one of `majority`, `weighted`",
            ),
            (
                "on-demand = \"yes\"",
                "`on-demand` = \"yes\"",
                "true or false",
            ),
            ("port = [1, 2]", "`port` = [1, 2]", "a whole number"),
            ("models = [[1]]", "`models`", "a list (an array)"),
        ] {
            let text = error(file);
            assert!(text.contains(key), "{file}: {text}");
            assert!(
                text.contains(&format!("expected {expected}")),
                "{file}: {text}"
            );
        }
        assert!(error("cache-ttl-s = 0").contains("0 is not in 1.."));
        assert!(error("port = = 1").starts_with("toy.toml: "));
    }

    #[test]
    fn the_effective_configuration_reads_back_the_same_with_secrets_redacted() {
        let file = "redis-url = \"redis://:hunter2@cache:6379/0\"\nshare = 0.25";
        let Parsed::Print(printed) = with_file(file, &["--print-config", "--port", "1"]).unwrap()
        else {
            panic!("not printed")
        };
        assert!(!printed.contains("hunter2"), "{printed}");
        for line in [
            "redis-url = \"redis://<redacted>@cache:6379/0\"",
            "port = 1\n",
            "share = 0.25\n",
            "on-demand = false\n",
            "vote = \"majority\"\n",
            "models = []\n",
            "[testing]\nseed = 1\n",
        ] {
            assert!(printed.contains(line), "{line} in {printed}");
        }
        let Parsed::Print(again) = with_file(FILE, &["--print-config"]).unwrap() else {
            panic!("not printed")
        };
        let Parsed::Print(twice) = with_file(&again, &["--print-config"]).unwrap() else {
            panic!("not printed")
        };
        assert_eq!(again, twice);
        // In the definitions' order, whichever keys the file sets.
        assert!(
            again.find("port =") < again.find("cache-ttl-s ="),
            "{again}"
        );
        assert!(twice.contains("# redis-url = (unset)"), "{twice}");
    }

    #[test]
    fn the_reference_lists_every_setting_once_with_its_form() {
        let page = reference(&Toy::command(), "# Toy");
        assert!(page.starts_with("# Toy\n"));
        assert!(page.contains("## Testing and emulation (the `[testing]` table)"));
        assert!(page.contains(
            "| `port` | a whole number | `8080` | `TOY_PORT_UNSET_IN_TESTS` | Port to bind |"
        ));
        assert!(page.contains("| `vote` | one of `majority`, `weighted` | `majority` |"));
        assert!(!page.contains("print-config"));
        assert_eq!(page.matches("| `seed` |").count(), 1);
    }

    #[test]
    fn parse_reads_the_file_the_flag_names() {
        let dir = std::env::temp_dir().join(format!("config-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("toy.toml");
        std::fs::write(&path, FILE).unwrap();
        let argv = ["toy", "--config", path.to_str().unwrap(), "--port", "1"];
        let Parsed::Run(toy) = parse::<Toy>(argv, "").unwrap() else {
            panic!("printed")
        };
        assert_eq!((toy.port, toy.cache_ttl_s), (1, 60));
        let missing = parse::<Toy>(["toy", "--config", "/nonexistent.toml"], "").unwrap_err();
        assert!(
            missing.to_string().contains("/nonexistent.toml"),
            "{missing}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
