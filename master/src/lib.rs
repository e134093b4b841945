//! The Cocktail-rs master (issue 4 and later): model selection, voting, dispatch and
//! resource control. The policies here are pure: the live master and the simulator call
//! the same code with measurements passed in.

pub mod estimate;
pub mod selection;
pub mod voting;
