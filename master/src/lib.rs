//! The Cocktail-rs master (issue 4 and later): model selection, voting, dispatch and
//! resource control. It starts with the ensemble-accuracy estimate that selection uses.

pub mod estimate;
