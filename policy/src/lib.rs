//! Pure policies: no I/O, no clocks, no randomness of their own. The live master and the
//! simulator make the same decisions by calling them with the same measurements.

pub mod autoscale;
pub mod control;
pub mod ensemble;
pub mod estimate;
pub mod forecast;
pub mod health;
pub mod kairos;
pub mod measured;
pub mod mix;
pub mod packing;
pub mod predict;
pub mod response;
pub mod ribbon;
pub mod selection;
pub mod tracking;
pub mod voting;
