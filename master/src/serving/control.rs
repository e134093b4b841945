//! Checking the control-plane messages workers send (`cocktail_common::control`) before
//! the registry sees them. Apart from the handlers so that the fuzz target
//! (`fuzz/fuzz_targets/control_plane.rs`) runs this very code on arbitrary bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use cocktail_common::control::{MAX_COUNT, Registration};

use crate::MasterError;
use crate::serving::tasks::TaskTable;

/// Longest instance id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// A registration names a model of this master's zoo, an http(s) URL and a short id.
pub fn check_registration(
    tasks: &BTreeMap<String, Arc<TaskTable>>,
    registration: &Registration,
) -> Result<(), MasterError> {
    if !tasks
        .values()
        .any(|t| t.model_index(&registration.model).is_some())
    {
        return Err(MasterError::invalid(
            "model",
            format!("`{}` is not in this master's zoo", registration.model),
        ));
    }
    if !(registration.url.starts_with("http://") || registration.url.starts_with("https://")) {
        return Err(MasterError::invalid(
            "url",
            format!("must be an http(s) URL; given `{}`", registration.url),
        ));
    }
    for (field, count) in [
        ("queue_items", registration.queue_items),
        ("threads", registration.threads),
    ] {
        at_most(field, count)?;
    }
    if registration.id.is_empty() || registration.id.len() > MAX_ID_BYTES {
        return Err(MasterError::invalid(
            "id",
            format!(
                "must be 1 to {MAX_ID_BYTES} bytes; given {}",
                registration.id.len()
            ),
        ));
    }
    Ok(())
}

/// A control-plane count within [`MAX_COUNT`].
pub fn at_most(field: &str, count: usize) -> Result<(), MasterError> {
    if count > MAX_COUNT {
        return Err(MasterError::invalid(
            field,
            format!("must be at most {MAX_COUNT}; given {count}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use cocktail_common::Zoo;

    use super::*;
    use crate::serving::tasks;
    use cocktail_policy::estimate::Rule;

    fn registration(model: &str, url: &str, id: &str) -> Registration {
        Registration {
            id: id.into(),
            model: model.into(),
            url: url.into(),
            packing_factor: 4,
            queue_items: 8,
            threads: 1,
            burst: false,
            instance_type: None,
        }
    }

    #[test]
    fn registrations_name_a_zoo_model_an_http_url_and_a_short_id() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let tables: BTreeMap<_, _> = tasks::from_zoo(&zoo, 100.0, 1.0, Rule::Majority)
            .into_iter()
            .map(|(name, table)| (name, Arc::new(table)))
            .collect();
        let model = zoo.models()[0].name.as_str();
        let url = "http://127.0.0.1:9000";
        assert!(check_registration(&tables, &registration(model, url, "w1")).is_ok());
        let long = "x".repeat(MAX_ID_BYTES + 1);
        for (bad, field) in [
            (registration("nope", url, "w1"), "`model`"),
            (registration(model, "ftp://x", "w1"), "`url`"),
            (registration(model, url, ""), "`id`"),
            (
                registration(model, url, &long),
                "`id`: must be 1 to 256 bytes; given 257",
            ),
        ] {
            let err = check_registration(&tables, &bad).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
    }
}
