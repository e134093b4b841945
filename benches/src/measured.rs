//! The tables measured on live processes, which `docs/results.md` includes in its
//! "measured live" sections: each tool writes its own under `OUT/measured/`, headed with
//! the date and the command that measured it, so that the page says where and when each
//! figure comes from.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Writes `body` to `out/measured/file`, after a line naming today's date (UTC) and
/// this process's command line. Returns the path written.
pub fn write(out: &Path, file: &str, body: &str) -> anyhow::Result<PathBuf> {
    let dir = out.join("measured");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(file);
    let command: Vec<String> = std::env::args().collect();
    let date = time::OffsetDateTime::now_utc().date();
    std::fs::write(
        &path,
        format!(
            "Measured on {date} by `{}`.\n\n{}",
            command.join(" "),
            body.trim_start()
        ),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
