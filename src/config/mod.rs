//! YAML configuration → validated settings (issue 5).
