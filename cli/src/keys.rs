//! `cocktail keys new`: a client API key for a master started with `--api-keys FILE`.
//! The key is printed once; the file gets only its SHA-256 and its budget.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, bail};
use cocktail_common::auth::{Secret, digest};

#[derive(Debug, clap::Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Make a key, append its digest and budget to FILE, and print the key.
    New {
        /// Who the key is for (shows in the master's metrics).
        #[arg(long)]
        name: String,
        /// Requests per second the key may send.
        #[arg(long)]
        rps: f64,
        /// Requests it may send at once (default: `rps` rounded up).
        #[arg(long)]
        burst: Option<u32>,
        /// The key file the master reads (`--api-keys`).
        #[arg(long, default_value = "keys.toml")]
        file: PathBuf,
    },
}

pub fn run(args: &KeysArgs) -> anyhow::Result<()> {
    let KeysCommand::New {
        name,
        rps,
        burst,
        file,
    } = &args.command;
    if !(*rps > 0.0 && rps.is_finite()) {
        bail!("`--rps` must be a positive number of requests per second");
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        bail!("`--name` must be letters, digits and `-_.@`; given `{name}`");
    }
    let key = Secret::generate()?;
    let mut entry = format!(
        "\n[[keys]]\nname = \"{name}\"\nsha256 = \"{}\"\nrps = {rps:?}\n",
        hex::encode(digest(key.expose()))
    );
    if let Some(burst) = burst {
        entry.push_str(&format!("burst = {burst}\n"));
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(entry.as_bytes()))
        .with_context(|| format!("appending to {}", file.display()))?;
    eprintln!(
        "added `{name}` ({rps} requests/s) to {}; the master reads it at start. The key (shown only now):",
        file.display()
    );
    println!("{}", key.expose());
    Ok(())
}
