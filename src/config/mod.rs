//! YAML configuration → validated settings (issue 5).

pub mod bus;
pub mod joint_map;
