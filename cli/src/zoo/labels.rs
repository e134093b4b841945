//! Class names from the label files models ship with.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// Reads class names: a JSON file is timm's `config.json` (`label_names`, readable names
/// from `label_descriptions` when present) or TorchServe's `index_to_name.json`; any
/// other file has one class per line.
pub fn read(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the labels file `{}`", path.display()))?;
    let labels = if text.trim_start().starts_with('{') {
        let json: Value = serde_json::from_str(&text)
            .with_context(|| format!("`{}` looks like JSON but does not parse", path.display()))?;
        from_json(&json).with_context(|| format!("`{}`", path.display()))?
    } else {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    if labels.len() < 2 {
        bail!(
            "`{}` names {} class(es); a classifier needs at least 2 (one per line, or timm's config.json, or TorchServe's index_to_name.json)",
            path.display(),
            labels.len()
        );
    }
    let mut seen = HashMap::new();
    for (i, label) in labels.iter().enumerate() {
        if let Some(first) = seen.insert(label.as_str(), i) {
            bail!(
                "`{}` names class `{label}` twice (classes {first} and {i}); class names must be unique",
                path.display()
            );
        }
    }
    Ok(labels)
}

fn from_json(json: &Value) -> anyhow::Result<Vec<String>> {
    let Some(object) = json.as_object() else {
        bail!("expected a JSON object");
    };
    if let Some(names) = object.get("label_names") {
        return timm(names, object.get("label_descriptions"));
    }
    torchserve(object)
}

/// timm: `label_names` (e.g. WordNet ids), with readable names in `label_descriptions`
/// (a map from name to description, or a list). A description's first comma-separated
/// part is the class name ("tench, Tinca tinca" is `tench`); classes that would share
/// one get their `label_names` entry added (ImageNet's two `crane`s become
/// `crane (n02012849)` and `crane (n03126707)`).
fn timm(names: &Value, descriptions: Option<&Value>) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = names
        .as_array()
        .context("`label_names` must be a list of strings")?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .context("`label_names` must be a list of strings")?;
    let Some(descriptions) = descriptions else {
        return Ok(names);
    };
    let full: Vec<String> = match descriptions {
        Value::Object(map) => names
            .iter()
            .map(|n| {
                map.get(n)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .with_context(|| format!("`label_descriptions` has no string for `{n}`"))
            })
            .collect::<anyhow::Result<_>>()?,
        Value::Array(list) if list.len() == names.len() => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .context("`label_descriptions` must hold strings")?,
        _ => bail!("`label_descriptions` must map each of `label_names` to a string"),
    };
    let short: Vec<String> = full
        .iter()
        .map(|d| d.split(',').next().unwrap_or(d).trim().to_owned())
        .collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for s in &short {
        *count.entry(s).or_default() += 1;
    }
    Ok(short
        .iter()
        .zip(&names)
        .map(|(s, n)| {
            if count[s.as_str()] > 1 {
                format!("{s} ({n})")
            } else {
                s.clone()
            }
        })
        .collect())
}

/// TorchServe: `{"0": "name", ...}` or `{"0": ["n01440764", "tench"], ...}` (the last
/// element is the readable name); indices must run from 0 without gaps.
fn torchserve(object: &serde_json::Map<String, Value>) -> anyhow::Result<Vec<String>> {
    let mut by_index = BTreeMap::new();
    for (key, value) in object {
        let index: usize = key.parse().with_context(|| {
            format!("key `{key}` is not a class index: expected timm's config.json (with `label_names`) or TorchServe's index_to_name.json (`{{\"0\": \"name\"}}`)")
        })?;
        let name = match value {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .last()
                .and_then(Value::as_str)
                .map(str::to_owned)
                .with_context(|| format!("class {index}: expected a name or [id, name]"))?,
            _ => bail!("class {index}: expected a name or [id, name]"),
        };
        by_index.insert(index, name);
    }
    for (expected, index) in by_index.keys().enumerate() {
        if *index != expected {
            bail!("class indices must run 0, 1, 2, ... without gaps; {expected} is missing");
        }
    }
    Ok(by_index.into_values().collect())
}
