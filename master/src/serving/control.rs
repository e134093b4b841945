//! Checking the control-plane messages workers send (`cocktail_common::control`) before
//! the registry sees them. Apart from the handlers so that the fuzz target
//! (`fuzz/fuzz_targets/control_plane.rs`) runs this very code on arbitrary bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use cocktail_common::control::Registration;

use crate::MasterError;
use crate::tasks::TaskTable;

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
